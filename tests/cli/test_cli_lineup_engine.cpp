// `epyctune run` and `epyctune bench` with tiny models on the lineup: a
// built-in profile (EPYC 9655, Zen 5) and the profile `profile generate`
// writes for a machine without one (2 x EPYC 7451, NPS4); `run` on every new
// machine with its built-in and with its generated profile. Each leaves the
// fixture exactly as it found it.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"
#include "stack/tree_snapshot.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Models {
  ScratchDir dir;
  fs::path target = dir.path() / "tiny.gguf", draft = dir.path() / "tiny-draft.gguf";
  Models() {
    auto a = run_cli(MKMODEL_BIN, {"mkmodel", target.string(), "--shape", "tiny", "--quant", "q4_0",
                                   "--seed", "1"});
    REQUIRE_MESSAGE(a.code == 0, a.err);
    auto b = run_cli(MKMODEL_BIN, {"mkmodel", draft.string(), "--pair-of", target.string(),
                                   "--agreement", "0.3", "--seed", "2"});
    REQUIRE_MESSAGE(b.code == 0, b.err);
  }
};
const Models& models() {
  static Models m;
  return m;
}

CliRun tuner(const fs::path& root, std::vector<std::string> args) {
  args.insert(args.begin(), {"--sysroot", root.string()});
  return run_cli(EPYCTUNE_BIN, args);
}

// run, applying the profile, then revert: the tree as it was.
void run_applied(const fs::path& root, const std::string& profile,
                 const std::vector<int>& draft_l3) {
  CAPTURE(profile);
  const auto before = snapshot_tree(root);
  auto run =
      tuner(root, {"run", "--profile", profile, "--model", models().target.string(), "--draft",
                   models().draft.string(), "--prompt", "hello", "-n", "4", "--json", "--apply"});
  REQUIRE_MESSAGE(run.code == kExitOk, run.err);
  auto j = json::parse(run.out);
  CHECK(j["launch"]["draft_l3"] == json(draft_l3));
  CHECK(j["launch"]["cpus_mapped"] == true);
  REQUIRE(tuner(root, {"revert"}).code == kExitOk);
  CHECK(diff_trees(before, snapshot_tree(root)) == "");
}

// run (applying the profile), revert, then bench: the tree as it was after each.
void run_and_bench(const fs::path& root, const std::string& profile,
                   const std::vector<int>& draft_l3) {
  run_applied(root, profile, draft_l3);
  const auto before = snapshot_tree(root);
  auto bench = tuner(root, {"bench", "--profile", profile, "--model", models().target.string(),
                            "--draft", models().draft.string(), "--tokens", "4", "--repeat", "1",
                            "--json", "--bw-mib", "16"});
  REQUIRE_MESSAGE(bench.code == kExitOk, bench.err);
  auto b = json::parse(bench.out);
  REQUIRE(b["rows"].size() == 9);
  CHECK(b["rows"][0]["name"] == "stock");
  CHECK(b["rows"][0]["tok_s"]["median"].get<double>() > 0);
  CHECK(b["rows"][8]["name"] == "spec");
  CHECK(b["rows"][8]["measured"] == true);
  CHECK(b["launch_plan"]["draft"]["l3"] == json(draft_l3));
  CHECK(diff_trees(before, snapshot_tree(root)) == "");
}

}  // namespace

TEST_CASE("run and bench on a lineup built-in: EPYC 9655 (Zen 5)") {
  ScratchDir dir;
  fixture::FixtureOptions o;
  o.machine = "9655";
  o.smt = false;
  fixture::create_fixture(dir.path(), o);
  run_and_bench(dir.path(), "9655", {0});
}

TEST_CASE("run and bench on a generated profile: 2 x EPYC 7451 (no built-in), NPS4") {
  ScratchDir dir;
  fixture::FixtureOptions o;
  o.machine = "7451-2s";
  o.nps = 4;
  fixture::create_fixture(dir.path() / "host", o);
  const fs::path file = dir.path() / "naples.toml";
  auto gen =
      run_cli(EPYCTUNE_BIN, {"--sysroot", (dir.path() / "host").string(), "profile", "generate",
                             "-o", file.string(), "--model", models().target.string(),
                             "--model-draft", models().draft.string()});
  REQUIRE_MESSAGE(gen.code == kExitOk, gen.err);
  // The tiny draft fits in one die's two 8 MB L3s: it runs from cache there.
  run_and_bench(dir.path() / "host", file.string(), {0, 1});
}

TEST_CASE("run on every new machine, with its built-in and with its generated profile") {
  for (const char* machine : {"9655", "9755", "9965", "9654", "9654-2s", "7763-2s"}) {
    CAPTURE(machine);
    ScratchDir dir;
    fixture::FixtureOptions o;
    o.machine = machine;
    o.smt = false;
    fixture::create_fixture(dir.path() / "host", o);
    run_applied(dir.path() / "host", machine, {0});
    const fs::path file = dir.path() / "generated.toml";
    auto gen = tuner(dir.path() / "host", {"profile", "generate", "-o", file.string()});
    REQUIRE_MESSAGE(gen.code == kExitOk, gen.err);
    run_applied(dir.path() / "host", file.string(), {0});
  }
}
