// docs/exit-codes.md against the programs: the epyctune-engine and epyctuned
// tables name CLI11's codes by CLI11's own numbers, and every exit code each
// program gives for a bad command line (and a few other runs) is in its
// table. The epyctune table is tests/cli/test_cli_options.cpp's.
#include <doctest/doctest.h>

#include <CLI/Error.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"

using epyctune::testing::run_cli;

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trimmed(std::string c) {
  c.erase(0, c.find_first_not_of(' '));
  c.erase(c.find_last_not_of(' ') + 1);
  return c;
}

// The rows "| 104 | `ConversionError` | meaning |" of the section "## TITLE":
// code -> name.
std::map<int, std::string> table(const std::string& title) {
  const std::string doc =
      read_text(std::filesystem::path(EPYCTUNE_SOURCE_DIR) / "docs/exit-codes.md");
  std::map<int, std::string> rows;
  std::istringstream lines(doc);
  bool in = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("## ")) in = line == "## " + title;
    if (!in || !line.starts_with("|")) continue;
    std::istringstream row(line.substr(1));
    std::string code, name;
    std::getline(row, code, '|');
    std::getline(row, name, '|');
    code = trimmed(code);
    name = trimmed(name);
    if (code.empty() || code.find_first_not_of("0123456789") != std::string::npos) continue;
    if (name.size() < 3 || name.front() != '`' || name.back() != '`') continue;
    rows[std::stoi(code)] = name.substr(1, name.size() - 2);
  }
  return rows;
}

// CLI11's codes for a bad command line, by the names CLI11 gives them.
int cli11(CLI::ExitCodes c) {
  return static_cast<int>(c);
}
const std::map<std::string, int>& cli11_codes() {
  static const std::map<std::string, int> codes{
      {"ConversionError", cli11(CLI::ExitCodes::ConversionError)},
      {"ValidationError", cli11(CLI::ExitCodes::ValidationError)},
      {"RequiredError", cli11(CLI::ExitCodes::RequiredError)},
      {"RequiresError", cli11(CLI::ExitCodes::RequiresError)},
      {"ExcludesError", cli11(CLI::ExitCodes::ExcludesError)},
      {"ExtrasError", cli11(CLI::ExitCodes::ExtrasError)},
      {"ArgumentMismatch", cli11(CLI::ExitCodes::ArgumentMismatch)}};
  return codes;
}

struct Case {
  std::vector<std::string> args;
  int code;
};

// Runs each case: the code is the one expected, and the program's table
// lists it.
void check_runs(const char* bin, const std::string& title, const std::vector<Case>& cases) {
  const auto doc = table(title);
  for (const auto& c : cases) {
    std::string line = title;
    for (const auto& a : c.args) line += " " + a;
    CAPTURE(line);
    const auto r = run_cli(bin, c.args);
    CHECK_MESSAGE(r.code == c.code, r.err);
    CHECK_MESSAGE(doc.count(r.code) == 1, "exit code " << r.code << " of `" << line
                                                       << "` is not in docs/exit-codes.md's ## "
                                                       << title << " table");
  }
}

}  // namespace

TEST_CASE("docs/exit-codes.md: the engine's and the daemon's tables, CLI11's codes by number") {
  for (const char* title : {"epyctune-engine", "epyctuned"}) {
    CAPTURE(title);
    const auto rows = table(title);
    // There was no table for either: the engine's 104-109 were nowhere.
    REQUIRE(rows.size() >= 5);
    CHECK(rows.count(0) == 1);
    CHECK(rows.count(1) == 1);
    // Any option may raise any of CLI11's parse errors: each has its row,
    // under CLI11's name and number.
    for (const auto& [name, code] : cli11_codes()) {
      CAPTURE(name);
      REQUIRE(rows.count(code) == 1);
      CHECK(rows.at(code) == name);
    }
    for (const auto& [code, name] : rows)
      if (code >= 100) CHECK_MESSAGE(cli11_codes().count(name) == 1, name << " is no CLI11 code");
  }
  const auto engine = table("epyctune-engine");
  CHECK(engine.at(3) == "placement");  // kExitPlacement, apps/epyctune-engine/launch_options.hpp
  const auto daemon = table("epyctuned");
  // The apply at start: epyctune apply's codes, the same words.
  CHECK(daemon.at(2) == "kExitFailed");
  CHECK(daemon.at(3) == "kExitLocked");
  CHECK(daemon.at(4) == "kExitPrivilege");
}

TEST_CASE("epyctune-engine: every exit code of a bad command line is documented") {
  using E = CLI::ExitCodes;
  const std::string doc = std::string(EPYCTUNE_SOURCE_DIR) + "/docs/exit-codes.md";
  check_runs(
      ENGINE_BIN, "epyctune-engine",
      {
          {{"--version"}, 0},
          {{"generate", "--help"}, 0},
          {{}, cli11(E::RequiredError)},
          {{"mkmodel", "x.gguf"}, cli11(E::RequiredError)},
          {{"tokenize", "-p", "x"}, cli11(E::RequiredError)},
          {{"generate", "--no-such-flag"}, cli11(E::ExtrasError)},
          {{"generate", "-n", "abc"}, cli11(E::ConversionError)},
          {{"generate", "-n"}, cli11(E::ArgumentMismatch)},
          {{"generate", "--launch-config", "/nonexistent/engine.toml"}, cli11(E::ValidationError)},
          {{"serve", "--timeout", "0"}, cli11(E::ValidationError)},
          {{"generate", "-p", "x", "-f", doc}, cli11(E::ExcludesError)},
          {{"generate", "-m", "/nonexistent/model.gguf", "-p", "x", "-n", "1"}, 1},
          {{"kernel-bench", "--type", "q9_9"}, 2},
      });
}

TEST_CASE("epyctuned: every exit code of a bad command line is documented") {
  using E = CLI::ExitCodes;
  check_runs(DAEMON_BIN, "epyctuned",
             {
                 {{"--version"}, 0},
                 {{"--no-such-flag"}, cli11(E::ExtrasError)},
                 {{"extra"}, cli11(E::ExtrasError)},
                 {{"--config"}, cli11(E::ArgumentMismatch)},
                 // Cannot start: no config. It stops at the config, before
                 // touching the host (the sysroot is a path that is not there).
                 {{"--config", "/nonexistent/epyctune.toml", "--sysroot", "/nonexistent",
                   "--socket", "/nonexistent/sock"},
                  1},
             });
}
