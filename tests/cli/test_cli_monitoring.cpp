// Fleet monitoring and the apply unit's stop: `verify --format prometheus`
// as a node_exporter textfile (valid exposition format, written atomically,
// clear errors), and `revert --unless-shutdown`.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"
#include "stack/checklist.hpp"
#include "test_util.hpp"

using namespace epyctune;
using namespace epyctune::testing;
namespace fs = std::filesystem;

namespace {

bool name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

// Reads `{a="x",b="y"}` from s[i]; returns the labels with their values
// unescaped, or an error in `why`.
std::map<std::string, std::string> parse_labels(const std::string& s, size_t& i, std::string& why) {
  std::map<std::string, std::string> labels;
  ++i;  // '{'
  while (i < s.size() && s[i] != '}') {
    size_t start = i;
    while (i < s.size() && name_char(s[i], i == start)) ++i;
    std::string name = s.substr(start, i - start);
    if (name.empty() || s.compare(i, 2, "=\"") != 0) {
      why = "bad label name at column " + std::to_string(i);
      return labels;
    }
    i += 2;
    std::string value;
    for (; i < s.size() && s[i] != '"'; ++i) {
      if (s[i] == '\\') {
        char e = i + 1 < s.size() ? s[++i] : '?';
        if (e == 'n')
          value += '\n';
        else if (e == '\\' || e == '"')
          value += e;
        else
          why = "bad escape \\" + std::string(1, e);
      } else {
        value += s[i];
      }
    }
    if (i >= s.size()) {
      why = "unterminated label value";
      return labels;
    }
    ++i;  // closing quote
    if (!labels.emplace(name, value).second) why = "label " + name + " repeated";
    if (i < s.size() && s[i] == ',') ++i;
  }
  if (i >= s.size()) why = "unterminated label set";
  ++i;
  return labels;
}

struct Exposition {
  std::string error;  // "" when the text is valid
  std::map<std::string, std::vector<std::map<std::string, std::string>>> samples;
  std::map<std::string, std::vector<std::string>> values;
};

// The text exposition format as node_exporter's textfile collector enforces
// it: HELP then TYPE once per family, before and next to its samples; valid
// names; label values escaped; no series twice; a newline at the end.
Exposition parse_exposition(const std::string& text) {
  Exposition e;
  std::set<std::string> families, series;
  std::string current;
  size_t line_no = 0, pos = 0;
  if (text.empty() || text.back() != '\n') e.error = "no trailing newline";
  while (e.error.empty() && pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    auto fail = [&](const std::string& why) {
      e.error = fmt::format("line {}: {}: {}", line_no, why, line);
    };
    if (line.rfind("# HELP ", 0) == 0) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      if (!families.insert(name).second) fail("family repeated");
      current = name;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      if (line != "# TYPE " + current + " gauge") fail("TYPE does not follow its HELP");
    } else if (!line.empty() && line[0] == '#') {
      fail("unexpected comment");
    } else {
      size_t i = 0;
      while (i < line.size() && name_char(line[i], i == 0)) ++i;
      std::string name = line.substr(0, i);
      if (name != current) {
        fail("sample outside its family");
        break;
      }
      std::map<std::string, std::string> labels;
      if (i < line.size() && line[i] == '{') {
        std::string why;
        labels = parse_labels(line, i, why);
        if (!why.empty()) {
          fail(why);
          break;
        }
      }
      if (i >= line.size() || line[i] != ' ') {
        fail("no value");
        break;
      }
      std::string value = line.substr(i + 1);
      if (value.empty() || value.find(' ') != std::string::npos) fail("bad value (or a timestamp)");
      if (!series.insert(line.substr(0, i)).second) fail("series repeated");
      e.samples[name].push_back(labels);
      e.values[name].push_back(value);
    }
  }
  return e;
}

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& x : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("prometheus: the exposition format, label escaping, one family each") {
  stack::Checklist c;
  c.profile = "epyc\"9754\\x";
  c.timestamp_seconds = 1700000000;
  c.lines.push_back({"irq", "name \"quoted\"\nnext", "/proc/irq/1\\smp", "1", "2",
                     stack::CheckResult::Fail, "", ""});
  c.lines.push_back({"bios", "boost", "/sys/x", "0", "0", stack::CheckResult::Pass, "", ""});
  c.lines.push_back(
      {"bios", "boost", "/sys/x", "0", "0", stack::CheckResult::Pass, "", ""});  // planned twice
  c.lines.push_back({"bios", "boost", "/sys/y", "0", "0", stack::CheckResult::Skip, "", ""});
  c.lines.push_back({"bios", "boost (reworded)", "/sys/x", "0", "1", stack::CheckResult::Fail, "",
                     "value:/sys/z"});
  c.passed = 2;
  c.failed = 2;
  c.skipped = 1;
  std::string text = stack::render_checklist(c, stack::ChecklistFormat::Prometheus);
  auto e = parse_exposition(text);
  REQUIRE_MESSAGE(e.error.empty(), (e.error + "\n" + text));
  CHECK(has(text, "epyctune_verify_ok{profile=\"epyc\\\"9754\\\\x\"} 0\n"));
  CHECK(has(text, "epyctune_verify_timestamp_seconds{profile=\"epyc\\\"9754\\\\x\"} 1700000000\n"));
  CHECK(has(text, "check=\"/proc/irq/1\\\\smp\",result=\"fail\"} 1\n"));
  REQUIRE(e.samples["epyctune_verify_check"].size() == 4);
  CHECK(e.samples["epyctune_verify_check"][0]["step"] == "irq");
  // Labels are ids, never the knob's display name: a reworded name is the
  // same series. It used to carry knob="name \"quoted\"\nnext" and path.
  for (const auto& labels : e.samples["epyctune_verify_check"]) {
    CHECK(labels.count("knob") == 0);
    CHECK(labels.count("path") == 0);
  }
  CHECK(e.samples["epyctune_verify_check"][3]["check"] == "value:/sys/z");
  // A skipped check is a result of its own, not -1: every sample is 1 and
  // the result label says pass, fail or skip.
  CHECK(e.values["epyctune_verify_check"] == std::vector<std::string>{"1", "1", "1", "1"});
  std::vector<std::string> results;
  for (const auto& labels : e.samples["epyctune_verify_check"])
    results.push_back(labels.at("result"));
  CHECK(results == std::vector<std::string>{"fail", "pass", "skip", "fail"});
  CHECK_FALSE(has(text, "-1"));
  // Which build wrote it.
  REQUIRE(e.samples["epyctune_build_info"].size() == 1);
  CHECK(e.samples["epyctune_build_info"][0]["version"] == EPYCTUNE_EXPECTED_VERSION);
  CHECK_FALSE(e.samples["epyctune_build_info"][0]["compiler"].empty());
  CHECK(e.values["epyctune_build_info"] == std::vector<std::string>{"1"});
  CHECK(e.values["epyctune_verify_checks"] == std::vector<std::string>{"2", "2", "1"});
  CHECK(e.samples["epyctune_verify_checks"][1]["result"] == "fail");
  // The checker itself rejects what the collector rejects.
  CHECK(!parse_exposition("# HELP a x\n# TYPE a gauge\na 1\n# HELP a x\n").error.empty());
  CHECK(
      !parse_exposition("# HELP a x\n# TYPE a gauge\na{l=\"x\"} 1\na{l=\"x\"} 2\n").error.empty());
  CHECK(!parse_exposition("# HELP a x\n# TYPE a gauge\na{l=\"\\x\"} 1\n").error.empty());
  CHECK(!parse_exposition("# HELP a x\n# TYPE a gauge\nb 1\n").error.empty());
}

TEST_CASE("cli: verify --format prometheus --output writes a valid textfile atomically") {
  CliHost h("9354");
  TempDir out;
  const auto prom = out.path() / "epyctune.prom";

  // Before apply the checks fail: the file is still written, with ok 0, exit 2.
  auto failing =
      h.run({"verify", "--profile", "9354", "--format", "prometheus", "--output", prom.string()});
  CHECK_MESSAGE(failing.code == kExitFailed, failing.err);
  CHECK(failing.out.empty());
  std::string text = read_file(prom);
  auto e = parse_exposition(text);
  REQUIRE_MESSAGE(e.error.empty(), e.error);
  CHECK(has(text, "epyctune_verify_ok{profile=\"epyc-9354\"} 0\n"));
  CHECK(e.samples["epyctune_verify_check"].size() > 50);
  CHECK(e.samples["epyctune_verify_timestamp_seconds"].size() == 1);
  CHECK(std::stoll(e.values["epyctune_verify_timestamp_seconds"][0]) > 1600000000);
  // Every check is named by its knob's identity (kind:location), one series
  // each, with a result word and the value 1.
  {
    std::set<std::string> ids;
    for (const auto& labels : e.samples["epyctune_verify_check"]) {
      const std::string& id = labels.at("check");
      CHECK_MESSAGE(id.find(':') != std::string::npos, id);
      CHECK_MESSAGE(id.find(' ') == std::string::npos, id);
      ids.insert(labels.at("step") + " " + id);
      const std::string& result = labels.at("result");
      CHECK((result == "pass" || result == "fail" || result == "skip"));
    }
    CHECK(ids.size() == e.samples["epyctune_verify_check"].size());
    for (const auto& v : e.values["epyctune_verify_check"]) CHECK(v == "1");
  }
  CHECK((fs::status(prom).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
         fs::perms::others_read));

  REQUIRE(h.run({"apply", "--profile", "9354"}).code == kExitOk);
  // A collector reading the file while it is rewritten sees a whole file each
  // time: the first version or a later one, never a prefix.
  const size_t checks = e.samples["epyctune_verify_check"].size();
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::string torn;
  std::thread reader([&] {
    while (!done.load()) {
      auto seen = parse_exposition(read_file(prom));
      if (!seen.error.empty() || seen.samples["epyctune_verify_check"].size() != checks)
        torn = seen.error.empty() ? "a different number of checks" : seen.error;
      reads.fetch_add(1);
    }
  });
  for (int i = 0; i < 3; ++i) {
    auto ok = h.run({"verify", "--format", "prometheus", "--output", prom.string()});
    CHECK_MESSAGE(ok.code == kExitOk, ok.err);
  }
  done.store(true);
  reader.join();
  CHECK(reads.load() > 0);
  CHECK_MESSAGE(torn.empty(), torn);
  CHECK(has(read_file(prom), "epyctune_verify_ok{profile=\"epyc-9354\"} 1\n"));
  CHECK(entries(out.path()) == 1);  // no temporary left behind

  // Without --output: the same text on stdout.
  auto stdout_run = h.run({"verify", "--format", "prometheus"});
  CHECK(stdout_run.code == kExitOk);
  CHECK(parse_exposition(stdout_run.out).error.empty());
  CHECK(has(stdout_run.out, "epyctune_verify_ok{profile=\"epyc-9354\"} 1\n"));
  REQUIRE(h.run({"revert"}).code == kExitOk);
}

TEST_CASE("cli: verify --output into a missing or unwritable directory is a clear error") {
  CliHost h("9354");
  TempDir out;
  const auto missing = out.path() / "no-such-dir" / "epyctune.prom";
  auto r = h.run(
      {"verify", "--profile", "9354", "--format", "prometheus", "--output", missing.string()});
  CHECK(r.code == kExitError);
  CHECK_MESSAGE(has(r.err, missing.string()), r.err);
  CHECK(has(r.err, "No such file or directory"));
  write_file(out.path() / "a-file", "x");
  auto notdir = h.run({"verify", "--profile", "9354", "--format", "prometheus", "--output",
                       (out.path() / "a-file" / "x.prom").string()});
  CHECK(notdir.code == kExitError);
  CHECK(has(notdir.err, "Not a directory"));
  // A failed run leaves the previous textfile as it was (stale, and the
  // timestamp metric says so), never truncated.
  const auto prom = out.path() / "epyctune.prom";
  write_file(prom, "previous\n");
  auto bad = h.run({"verify", "--profile", "no-such-profile", "--format", "prometheus", "--output",
                    prom.string()});
  CHECK(bad.code == kExitError);
  CHECK(read_file(prom) == "previous\n");
}

// A test cannot shut the system down: the test-only build of the CLI
// (tests/cli_hooks) takes the manager's SystemState from the environment.
TEST_CASE("cli: revert --unless-shutdown keeps the state only while the system goes down") {
  CliHost h("9354");
  REQUIRE(h.run({"apply", "--profile", "9354"}).code == kExitOk);
  auto base = std::vector<std::string>{"--sysroot", h.root(), "revert", "--unless-shutdown"};
  auto kept = run_cli(EPYCTUNE_HOOKED_BIN, base, "EPYCTUNE_TEST_SYSTEM_STATE=stopping");
  CHECK(kept.code == kExitOk);
  CHECK(has(kept.out, "shutting down: keeping the applied state"));
  CHECK(std::count(kept.out.begin(), kept.out.end(), '\n') == 1);
  CHECK(kept.err.empty());
  CHECK(has(h.run({"status"}).out, "profile: epyc-9354"));

  auto json_args = base;
  json_args.push_back("--json");
  auto kept_json = run_cli(EPYCTUNE_HOOKED_BIN, json_args, "EPYCTUNE_TEST_SYSTEM_STATE=stopping");
  CHECK(kept_json.code == kExitOk);
  CHECK(nlohmann::json::parse(kept_json.out)["changed"] == false);
  CHECK(std::count(kept_json.out.begin(), kept_json.out.end(), '\n') == 1);

  auto reverted = run_cli(EPYCTUNE_HOOKED_BIN, base, "EPYCTUNE_TEST_SYSTEM_STATE=running");
  CHECK(reverted.code == kExitOk);
  CHECK(has(reverted.out, "reverted"));
  CHECK(has(h.run({"status"}).out, "nothing applied"));

  // The shipped binary has no such hook: the variable changes nothing.
  REQUIRE(h.run({"apply", "--profile", "9354"}).code == kExitOk);
  auto shipped = run_cli(EPYCTUNE_BIN, base, "EPYCTUNE_TEST_SYSTEM_STATE=stopping");
  CHECK(shipped.code == kExitOk);
  CHECK(has(shipped.out, "reverted"));
  CHECK(has(h.run({"status"}).out, "nothing applied"));
}
