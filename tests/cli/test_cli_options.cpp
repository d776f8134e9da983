// Global options after the subcommand, --version, the one exit-code table,
// logging levels, help texts, and /etc/epyctune/profiles overriding built-ins.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("cli: global options work before and after the subcommand") {
  CliHost h("9354");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--sysroot", h.root(), "plan", "--profile", "9354", "--json"},
           {"plan", "--profile", "9354", "--sysroot", h.root(), "--json"},
           {"plan", "--sysroot", h.root(), "-v", "--profile", "9354", "--json"}}) {
    auto r = cli(args);
    CAPTURE(args.front());
    REQUIRE_MESSAGE(r.code == kExitOk, r.err);
    auto j = json::parse(r.out);
    CHECK(j["profile"] == "epyc-9354");
    CHECK(has(j["host"]["source"].get<std::string>(), h.root()));
  }
  // Two levels down: `profile validate` takes --sysroot after its file too.
  std::ofstream(h.dir.path() / "mask.toml") << "include = \"9354\"\n[cat]\ndraft_cbm = \"1ffff\"\n";
  auto mask = (h.dir.path() / "mask.toml").string();
  CHECK(cli({"profile", "validate", mask}).code == kExitOk);
  CHECK(cli({"profile", "validate", mask, "--sysroot", h.root()}).code == kExitError);
  auto detect = cli({"detect", "--sysroot", h.root()});
  CHECK(has(detect.out, "epyc-9354 describes"));
}

TEST_CASE("cli: --version prints project(VERSION); --help exits 0 and names the exit codes") {
  auto v = cli({"--version"});
  CHECK(v.code == kExitOk);
  CHECK(v.out == std::string("epyctune ") + EPYCTUNE_EXPECTED_VERSION + "\n");
  auto help = cli({"--help"});
  CHECK(help.code == kExitOk);
  CHECK(has(help.out, "--version"));
  for (const char* cmd : {"apply", "plan", "verify", "revert", "status", "detect"}) {
    CAPTURE(cmd);
    auto h = cli({cmd, "--help"});
    CHECK(h.code == kExitOk);
    CHECK(has(h.out, "docs/exit-codes.md"));
  }
  auto nested = cli({"profile", "list", "--help"});
  CHECK(has(nested.out, "docs/exit-codes.md"));
}

TEST_CASE("cli: one exit-code table; parse errors are usage errors, not 100+") {
  CliHost h("9354");
  CHECK(cli({}).code == kExitError);              // no subcommand
  CHECK(cli({"frobnicate"}).code == kExitError);  // unknown subcommand
  CHECK(cli({"plan", "--no-such-option"}).code == kExitError);
  CHECK(cli({"plan"}).code == kExitError);  // --profile missing
  CHECK(cli({"fixture", "create", "--machine", "9999", "x"}).code == kExitError);
  auto missing = cli({"--sysroot", (h.dir.path() / "nope").string(), "detect"});
  CHECK_MESSAGE(missing.code == kExitError, missing.err);          // detect used to say 2
  CHECK(h.run({"plan", "--profile", "9754"}).code == kExitError);  // profile/host mismatch
  CHECK(h.run({"apply", "--profile", "9754"}).code == kExitError);
  CHECK(h.run({"fixture", "create", "--machine", "9354", h.root()}).code == kExitError);
  CHECK(h.run({"verify", "--profile", "9354"}).code == kExitFailed);  // drift
  CHECK(h.run({"profile", "show", "nope"}).code == kExitError);
}

TEST_CASE("docs/exit-codes.md documents exactly the codes of common/exit_codes.hpp") {
  auto doc = read_text(std::filesystem::path(EPYCTUNE_SOURCE_DIR) / "docs/exit-codes.md");
  // Rows "| 0 | `kExitOk` | meaning |": the code, then the backquoted name.
  auto cell = [](std::string c) {
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
    return c;
  };
  std::map<std::string, int> documented;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("|")) continue;
    std::istringstream row(line.substr(1));
    std::string code, name;
    std::getline(row, code, '|');
    std::getline(row, name, '|');
    code = cell(code);
    name = cell(name);
    if (code.empty() || code.find_first_not_of("0123456789") != std::string::npos) continue;
    if (name.size() < 3 || name.front() != '`' || name.back() != '`') continue;
    name = name.substr(1, name.size() - 2);
    if (name.starts_with("kExit")) documented[name] = std::stoi(code);
  }
  std::map<std::string, int> defined{{"kExitOk", kExitOk},
                                     {"kExitError", kExitError},
                                     {"kExitFailed", kExitFailed},
                                     {"kExitLocked", kExitLocked},
                                     {"kExitPrivilege", kExitPrivilege}};
  CHECK(documented == defined);
}

TEST_CASE("cli: logging goes to stderr: warnings by default, -v info, -vv every read") {
  CliHost h("9354");
  auto quiet = h.run({"plan", "--profile", "9354", "--json"});
  CHECK(quiet.err == "");
  auto info = h.run({"plan", "--profile", "9354", "--json", "-v"});
  CHECK(has(info.err, "epyctune: info: profile epyc-9354 from profiles/epyc-9354.toml"));
  CHECK_FALSE(has(info.err, "debug"));
  auto debug = h.run({"plan", "--profile", "9354", "--json", "-vv"});
  CHECK(has(debug.err, "epyctune: debug: read numa/"));
  CHECK(json::parse(debug.out)["profile"] == "epyc-9354");  // stdout stays clean JSON
  // Writes, whoever makes them: apply and revert.
  const std::string hugepages_write =
      "epyctune: debug: write "
      "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages <- ";
  auto apply = h.run({"-vv", "apply", "--profile", "9354", "--steps", "numa"});
  REQUIRE(apply.code == kExitOk);
  CHECK(has(apply.err, hugepages_write));
  auto revert = h.run({"revert", "-vv"});
  REQUIRE(revert.code == kExitOk);
  CHECK(has(revert.err, hugepages_write));
}

TEST_CASE("cli: help and profile text speak to users, not to the source tree") {
  auto plan = cli({"plan", "--help"});
  CHECK(has(plan.out, "docs/json/stack.md"));
  CHECK_FALSE(has(plan.out, "lib/"));
  for (const char* p : {"9754", "9354", "7543"}) {
    auto show = cli({"profile", "show", p});
    CHECK(show.code == kExitOk);
    CHECK(has(show.out, "# Hardware notes:"));
    CHECK_FALSE(has(show.out, "design notes"));
  }
}

TEST_CASE("cli: /etc/epyctune/profiles/NAME.toml overrides the built-in, as /etc/tuned does") {
  CliHost h("9354");
  auto dir = h.dir.path() / "etc/epyctune/profiles";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "epyc-9354.toml") << "include = \"epyc-9354\"\n[spec]\ndraft_len = 7\n";
  std::ofstream(dir / "mine.toml") << "include = \"9354\"\nname = \"mine\"\n";
  std::ofstream(dir / "9754.toml") << "include = \"9754\"\n";  // an alias: never loaded

  // Found by name and by alias; the built-in is still what the override includes.
  for (const char* name : {"epyc-9354", "9354"}) {
    auto show = h.run({"profile", "show", name, "--json"});
    REQUIRE_MESSAGE(show.code == kExitOk, show.err);
    auto j = json::parse(show.out);
    CHECK(j["spec"]["draft_len"] == 7);
    CHECK(j["source_file"] == (dir / "epyc-9354.toml").string());
    CHECK(j["includes"][0] == "profiles/epyc-9354.toml");
  }
  auto builtin = cli({"profile", "show", "9354", "--json"});  // the live host has none
  CHECK(json::parse(builtin.out)["spec"]["draft_len"] != 7);
  CHECK(h.run({"plan", "--profile", "mine", "--json"}).code == kExitOk);

  auto list = h.run({"profile", "list"});
  CHECK(list.code == kExitOk);
  CHECK(has(list.out, "[overrides the built-in: " + (dir / "epyc-9354.toml").string() + "]"));
  CHECK(has(list.out, "[" + (dir / "mine.toml").string() + "]"));
  CHECK(has(list.err, "9754 is an alias of epyc-9754; name the file epyc-9754.toml"));
  auto lj = json::parse(h.run({"profile", "list", "--json"}).out);
  std::map<std::string, json> by_name;
  for (const auto& e : lj) by_name[e["name"]] = e;
  CHECK(by_name["epyc-9354"]["overrides_builtin"] == true);
  CHECK(by_name["epyc-9754"]["source"] == "built-in");
  CHECK(by_name["mine"]["overrides_builtin"] == false);
  CHECK(by_name["9754"].contains("ignored"));
}
