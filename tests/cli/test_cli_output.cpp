// Issue 33, output volume: on a 9754 (256 CPUs) plan, verify and apply used
// to print one row per CPU (505, 462 and 211 lines). Rows that differ only by
// a CPU (or IRQ, or L3 domain) number and agree on everything else fold into
// one with a CPU list; -v shows each; JSON never folds. Columns are aligned,
// colour goes to a terminal only, the last line says what to run after a
// boot configuration change, and revert shows each value on one line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;

namespace {

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

size_t knobs_named(const json& plan, const std::string& suffix) {
  size_t n = 0;
  for (const auto& st : plan["steps"])
    for (const auto& k : st["knobs"]) {
      auto name = k["knob"].get<std::string>();
      n += name.size() > suffix.size() && name.ends_with(suffix);
    }
  return n;
}

}  // namespace

TEST_CASE("cli: plan on a 9754 fits two screens; -v lists every CPU; JSON is unfolded") {
  CliHost h("9754");
  auto plan = h.run({"plan", "--profile", "9754"});
  REQUIRE(plan.code == kExitOk);
  CHECK(lines(plan.out) <= 150);  // was 505
  CHECK(has(plan.out, "CPUs 2-127 governor"));
  CHECK(has(plan.out, "schedutil -> performance"));
  CHECK(has(plan.out, "CPUs 2-127 PrefetchControl"));
  CHECK(has(plan.out, "IRQs 0,4,8-9,24-34 affinity"));
  CHECK(has(plan.out, "root group L3 domains 0-15"));
  CHECK_FALSE(has(plan.out, "cpu17 governor"));

  auto verbose = h.run({"plan", "--profile", "9754", "-v"});
  CHECK(lines(verbose.out) > 400);
  CHECK(has(verbose.out, "cpu17 governor"));

  // Scripts get every knob, whatever the text does, and -v does not touch it.
  auto j = h.run({"plan", "--profile", "9754", "--json"});
  CHECK(j.out == h.run({"plan", "--profile", "9754", "--json", "-v"}).out);
  CHECK(knobs_named(json::parse(j.out), " governor") == 126);

  auto verify = h.run({"verify", "--profile", "9754"});
  CHECK(lines(verify.out) <= 150);  // was 462
  CHECK(has(verify.out, "CPUs 2-127 governor"));
  auto verify_json = json::parse(h.run({"verify", "--profile", "9754", "--json"}).out);
  CHECK(verify_json["checks"].size() > 400);
}

TEST_CASE("cli: --changed-only shows what changes; apply's text folds like the plan's") {
  CliHost h("9754");
  auto changed = h.run({"plan", "--profile", "9754", "--changed-only"});
  REQUIRE(changed.code == kExitOk);
  CHECK(has(changed.out, "CPUs 2-127 governor"));
  CHECK_FALSE(has(changed.out, "scaling_max_freq"));  // unchanged
  CHECK_FALSE(has(changed.out, "pending-reboot  "));
  CHECK_FALSE(has(changed.out, "Step 6 prefetch"));  // nothing changes there
  CHECK(has(changed.out, "Summary: 181 change"));    // the summary counts all

  auto check = h.run({"apply", "--profile", "9754", "--check", "--changed-only"});
  CHECK(check.code == kExitOk);
  CHECK(has(check.out, "would-apply"));
  CHECK_FALSE(has(check.out, "skipped"));

  auto apply = h.run({"apply", "--profile", "9754"});
  REQUIRE(apply.code == kExitOk);
  CHECK(lines(apply.out) <= 60);  // was 211
  CHECK(has(apply.out, "applied  CPUs 2-127 governor"));
  // The GRUB drop-in shows as its first line, never its whole text flattened.
  CHECK(has(apply.out, "(+2 lines)"));
  CHECK_FALSE(has(apply.out, "GRUB_CMDLINE_LINUX_DEFAULT"));
}

TEST_CASE("cli: verify's columns are aligned: no status runs into the step") {
  CliHost h("9354");
  auto v = h.run({"verify", "--profile", "9354"});
  REQUIRE(v.code == kExitFailed);
  CHECK_FALSE(has(v.out, "[skip]bios"));  // the old table
  CHECK_FALSE(has(v.out, "[FAIL]bios"));
  auto rows = split_lines(v.out);
  REQUIRE(rows.size() > 3);
  const size_t step_col = rows[0].find("STEP"), knob_col = rows[0].find("KNOB");
  REQUIRE(step_col != std::string::npos);
  for (const auto& r : rows) {
    if (r.empty() || r[0] != '[') continue;
    CAPTURE(r);
    CHECK(r[step_col - 1] == ' ');
    CHECK(r[step_col - 2] == ' ');
    CHECK(r[step_col] != ' ');
    CHECK(r[knob_col - 1] == ' ');
    CHECK(r[knob_col] != ' ');
  }
}

TEST_CASE("cli: colour on a terminal only, and never with NO_COLOR") {
  CliHost h("9354");
  // The test's own environment must not decide: a terminal that can colour.
  const char* term = std::getenv("TERM");
  const std::string saved_term = term ? term : "";
  ::setenv("TERM", "xterm", 1);
  ::unsetenv("NO_COLOR");
  const std::vector<std::string> args{"--sysroot", h.root(), "verify", "--profile", "9354"};
  auto tty = run_cli_on_tty(EPYCTUNE_BIN, args);
  auto no_color = run_cli_on_tty(EPYCTUNE_BIN, args, "NO_COLOR=1");
  auto pipe = run_cli(EPYCTUNE_BIN, args);
  if (term)
    ::setenv("TERM", saved_term.c_str(), 1);
  else
    ::unsetenv("TERM");
  CHECK(has(tty.out, "\033[1;31m[FAIL]\033[0m"));
  CHECK(has(tty.out, "\033[32m[ok]\033[0m"));
  CHECK_FALSE(has(no_color.out, "\033["));
  CHECK(has(no_color.out, "[FAIL]"));
  CHECK_FALSE(has(pipe.out, "\033["));
}

TEST_CASE("cli: the last line says to run update-grub and reboot; revert's values are one line") {
  CliHost h("9754");
  auto plan = h.run({"plan", "--profile", "9754"});
  CHECK(has(plan.out, "Next: epyctune apply --profile epyc-9754, then run update-grub and reboot"));
  auto apply = h.run({"apply", "--profile", "9754"});
  REQUIRE(apply.code == kExitOk);
  CHECK(has(apply.out, "\nNext: run update-grub, then reboot"));
  // Applied: the drop-in is written, the boot parameters wait for the reboot.
  auto again = h.run({"plan", "--profile", "9754"});
  CHECK(has(again.out, "\nNext: reboot ("));
  CHECK(has(again.out, "update-grub"));

  auto revert = h.run({"revert"});
  REQUIRE(revert.code == kExitOk);
  // Before, the launch config's TOML and the drop-in were printed raw, a
  // line of the file per line of output.
  CHECK_FALSE(has(revert.out, "\ndraft_cpus = "));
  CHECK_FALSE(has(revert.out, "\nGRUB_CMDLINE_LINUX_DEFAULT"));
  CHECK(has(revert.out, "[spec] (+14 lines) -> (empty)"));
  for (const auto& l : split_lines(revert.out)) {
    CAPTURE(l);
    bool known = l.starts_with("  ") || l.ends_with(":") || l.starts_with("reverted ") ||
                 l.starts_with("Next: ") || l.starts_with("note: ");
    CHECK(known);
  }
  CHECK(has(revert.out, "restored  CPUs 2-127 governor"));
  CHECK(has(revert.out, "\nNext: run update-grub, then reboot"));
  auto revert_json = json::parse(h.run({"revert", "--json"}).out);
  CHECK(revert_json.is_object());
}
