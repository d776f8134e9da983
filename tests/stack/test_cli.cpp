// The real `epyctune` binary on fixture trees: JSON and every verify format
// parse, exit codes, check mode, idempotence, and a crash of the test-only
// build of the CLI (tests/cli_hooks) followed by the real `epyctune revert`.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "stack/apply.hpp"
#include "stack_harness.hpp"
#include "tree_snapshot.hpp"
#include "write_crash.hpp"

using namespace epyctune;
using nlohmann::json;

namespace {

using Run = testing::CliRun;

Run run(const std::vector<std::string>& args) {
  return testing::run_cli(EPYCTUNE_BIN, args);
}

// The same CLI with the test hooks that `env` sets (tests/cli_hooks).
Run run_hooked(const std::vector<std::string>& args, const std::string& env) {
  return testing::run_cli(EPYCTUNE_HOOKED_BIN, args, env);
}

std::vector<std::string> with_root(const testing::StackHost& h, std::vector<std::string> args) {
  args.insert(args.begin(), {"--sysroot", h.dir.path().string()});
  return args;
}

}  // namespace

TEST_CASE("cli: plan/apply/verify/revert on the 9754 fixture, every output format") {
  testing::StackHost h("9754");
  auto before = testing::snapshot_tree(h.dir.path());

  auto plan = run(with_root(h, {"plan", "--profile", "9754", "--json"}));
  REQUIRE_MESSAGE(plan.code == 0, plan.err);
  auto pj = json::parse(plan.out);
  // The documented schema (docs/json/stack.md), key by key.
  CHECK(pj["schema_version"] == 1);
  for (const char* k : {"profile", "host", "mismatches", "partition", "steps", "summary"})
    CHECK_MESSAGE(pj.contains(k), k);
  for (const char* k : {"source", "brand", "vendor", "family", "model", "sockets", "numa_nodes",
                        "l3_domains", "cores", "cpus"})
    CHECK_MESSAGE(pj["host"].contains(k), k);
  for (const char* k : {"draft_cpus", "verify_cpus", "housekeeping_cpus", "idle_sibling_cpus",
                        "draft_nodes", "verify_nodes", "domains", "error"})
    CHECK_MESSAGE(pj["partition"].contains(k), k);
  for (const char* k : {"index", "cache_id", "socket", "node", "role", "cpus", "draft_cpus",
                        "verify_cpus", "housekeeping_cpus"})
    CHECK_MESSAGE(pj["partition"]["domains"][0].contains(k), k);
  for (const char* k : {"number", "name", "title", "knobs"})
    CHECK_MESSAGE(pj["steps"][0].contains(k), k);
  for (const char* k : {"knob", "kind", "path", "current", "desired", "status", "reason"})
    CHECK_MESSAGE(pj["steps"][0]["knobs"][0].contains(k), k);
  CHECK(pj["partition"]["draft_cpus"] == "2-15");
  CHECK(pj["profile"] == "epyc-9754");
  CHECK(pj["partition"]["domains"].size() == 16);
  CHECK(pj["partition"]["domains"][0]["role"] == "draft");
  CHECK(pj["steps"].size() == 8);
  CHECK(pj["summary"]["change"].get<int>() > 0);

  auto verify_before = run(with_root(h, {"verify", "--profile", "9754"}));
  CHECK(verify_before.code == 2);
  CHECK(verify_before.out.find("NOT VERIFIED") != std::string::npos);

  auto check = run(with_root(h, {"apply", "--profile", "9754", "--check", "--json"}));
  CHECK(check.code == 0);
  CHECK(json::parse(check.out)["changed"] == true);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path(), &before)) == "");

  auto apply = run(with_root(h, {"apply", "--profile", "9754", "--json"}));
  REQUIRE_MESSAGE(apply.code == 0, (apply.out + apply.err));
  auto aj = json::parse(apply.out);
  CHECK(aj["changed"] == true);
  CHECK(aj["reboot_required"] == true);
  CHECK(aj["steps"][0]["step"] == "bios");
  auto k0 = aj["steps"][0]["knobs"][1];
  for (const char* f : {"status", "before", "after", "reason"}) CHECK(k0.contains(f));

  auto again = run(with_root(h, {"apply", "--profile", "9754", "--json"}));
  CHECK(again.code == 0);
  CHECK(json::parse(again.out)["changed"] == false);

  auto vj = run(with_root(h, {"verify", "--profile", "9754", "--format", "json"}));
  CHECK_MESSAGE(vj.code == 0, vj.out);
  auto v = json::parse(vj.out);
  CHECK(v["ok"] == true);
  CHECK(v["failed"] == 0);
  CHECK(v["checks"].size() > 100);
  auto table = run(with_root(h, {"verify", "--profile", "9754"}));
  CHECK(table.code == 0);
  CHECK(table.out.find("VERIFIED:") != std::string::npos);
  CHECK(table.out.find("[ok]") != std::string::npos);
  auto md = run(with_root(h, {"verify", "--profile", "9754", "--format", "md"}));
  CHECK(md.out.find("| result | step | knob |") != std::string::npos);
  CHECK(md.out.find("| pass | bios |") != std::string::npos);
  auto junit = run(with_root(h, {"verify", "--profile", "9754", "--format", "junit"}));
  CHECK(junit.out.rfind("<?xml", 0) == 0);
  CHECK(junit.out.find("<testsuite name=\"epyctune-verify epyc-9754\"") != std::string::npos);
  CHECK(junit.out.find("failures=\"0\"") != std::string::npos);
  auto prom = run(with_root(h, {"verify", "--profile", "9754", "--format", "prometheus"}));
  CHECK(prom.out.find("# TYPE epyctune_verify_check gauge") != std::string::npos);
  CHECK(prom.out.find("epyctune_verify_ok{profile=\"epyc-9754\"} 1") != std::string::npos);
  auto bad = run(with_root(h, {"verify", "--profile", "9754", "--format", "xml"}));
  CHECK(bad.code == 1);
  CHECK(bad.err.find("use table, json, md, junit or prometheus") != std::string::npos);

  auto revert = run(with_root(h, {"revert", "--json"}));
  CHECK(revert.code == 0);
  CHECK(json::parse(revert.out)["changed"] == true);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path(), &before)) == "");
  auto nothing = run(with_root(h, {"revert"}));
  CHECK(nothing.code == 0);
  CHECK(nothing.out.find("nothing to revert") != std::string::npos);
}

TEST_CASE("cli: bad input is exit 1 and names the problem; nothing is written") {
  testing::StackHost h("9354");
  auto before = testing::snapshot_tree(h.dir.path());
  auto wrong = run(with_root(h, {"apply", "--profile", "9754"}));
  CHECK(wrong.code == 1);
  CHECK(wrong.err.find("128") != std::string::npos);  // the profile's core count
  CHECK(wrong.err.find("32") != std::string::npos);   // and the host's
  auto steps = run(with_root(h, {"apply", "--profile", "9354", "--steps", "1,frobnicate"}));
  CHECK(steps.code == 1);
  CHECK(steps.err.find("unknown step 'frobnicate'") != std::string::npos);
  auto partial = run(with_root(h, {"apply", "--profile", "9354", "--steps", "numa", "--json"}));
  CHECK(partial.code == 0);
  auto pj = json::parse(partial.out);
  REQUIRE(pj["steps"].size() == 1);
  CHECK(pj["steps"][0]["step"] == "numa");
  CHECK(run(with_root(h, {"revert"})).code == 0);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path(), &before)) == "");
}

TEST_CASE("cli: crash of the CLI after the k-th write, then `epyctune revert`") {
  testing::StackHost h("9754");
  auto before = testing::snapshot_tree(h.dir.path());
  // One write per applied knob: count them in a complete run first.
  auto full = json::parse(run(with_root(h, {"apply", "--profile", "9754", "--json"})).out);
  int n = 0;
  for (const auto& step : full["steps"])
    for (const auto& k : step["knobs"]) n += k["status"] == "applied";
  REQUIRE(n > 100);
  REQUIRE(run(with_root(h, {"revert"})).code == 0);
  for (int k : {1, 2, n / 2, n}) {
    CAPTURE(k);
    auto crashed = run_hooked(with_root(h, {"apply", "--profile", "9754"}),
                              "EPYCTUNE_TEST_CRASH_AFTER_WRITES=" + std::to_string(k));
    CHECK(crashed.code == testing::kCrashExitCode);
    auto r = run(with_root(h, {"revert"}));
    CHECK_MESSAGE(r.code == 0, r.err);
    // The crashed process left its pid in the lock: revert took it over.
    CHECK(r.out.find("stale lock") != std::string::npos);
    CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path(), &before)) == "");
  }
}

TEST_CASE("cli: a real write failure mid-apply rolls back and names knob, path and errno") {
  testing::StackHost h("9354");
  // A plain file where apply must create the verify group's directory: mkdir
  // fails with EEXIST after bios, numa, isolation and the draft group were written.
  { std::ofstream(h.dir.path() / "sys/fs/resctrl/epyctune-verify") << "in the way\n"; }
  auto before = testing::snapshot_tree(h.dir.path());
  auto r = run(with_root(h, {"apply", "--profile", "9354", "--json"}));
  CHECK(r.code == stack::kExitFailed);
  auto j = json::parse(r.out);
  CHECK(j["rolled_back"] == true);
  CHECK(j["changed"] == false);
  std::string err = j["error"];
  CHECK(err.find("cat/group epyctune-verify") != std::string::npos);
  CHECK(err.find("sys/fs/resctrl/epyctune-verify") != std::string::npos);
  CHECK(err.find("EEXIST") != std::string::npos);
  CHECK(r.err.find("rolled back") != std::string::npos);
  // Everything but epyctune's own journal is as before (the lock is released,
  // and a released lock leaves no file).
  auto after = testing::snapshot_tree(h.dir.path(), &before);
  CHECK(after.entries.erase("var/lib/epyctune/journal") == 1);
  CHECK(after.entries.count("var/lib/epyctune/lock") == 0);
  CHECK(testing::diff_trees(before, after) == "");
  CHECK(run(with_root(h, {"revert"})).code == 0);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path(), &before)) == "");
}
