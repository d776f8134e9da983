// `epyctune bench`, `epyctune run` and `epyctune-engine generate
// --launch-config` on a 9754 fixture with tiny models: the fixture comes back
// byte for byte, also after SIGINT, and the draft partition is the profile's
// in the plan, the launch config and the engine of one run.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../fixture/fixture_cache.hpp"
#include "../stack/tree_snapshot.hpp"
#include "bench/engine_process.hpp"
#include "launch/engine_side.hpp"

using namespace epyctune;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bench::ProcessResult tuner(const fs::path& root, std::vector<std::string> args) {
  args.insert(args.begin(), {EPYCTUNE_BIN, "--sysroot", root.string()});
  return bench::run_process(args);
}

// Tiny target and draft, made once per test process.
struct Models {
  testing::ScratchDir dir;
  fs::path target = dir.path() / "tiny.gguf", draft = dir.path() / "tiny-draft.gguf";
  Models() {
    auto a = bench::run_process({MKMODEL_BIN, "mkmodel", target.string(), "--shape", "tiny",
                                 "--quant", "q4_0", "--seed", "1"});
    REQUIRE_MESSAGE(a.exit_code == 0, a.err);
    auto b = bench::run_process({MKMODEL_BIN, "mkmodel", draft.string(), "--pair-of",
                                 target.string(), "--agreement", "0.3", "--seed", "2"});
    REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  }
};
const Models& models() {
  static Models m;
  return m;
}

struct Host {
  testing::ScratchDir dir;
  Host() {
    fixture::FixtureOptions o;
    o.machine = "9754";
    o.nps = 1;
    fixture::create_fixture(dir.path(), o);
  }
};

}  // namespace

TEST_CASE("bench: stock through step 8 on a fixture, then the fixture exactly as found") {
  Host h;
  const auto before = testing::snapshot_tree(h.dir.path());
  const auto svg = h.dir.path().parent_path() / (h.dir.path().filename().string() + ".svg");
  auto r = tuner(h.dir.path(), {"bench", "--profile", "9754", "--model", models().target.string(),
                                "--draft", models().draft.string(), "--tokens", "8", "--repeat",
                                "2", "--json", "--chart", svg.string(), "--bw-mib", "16"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
  auto j = json::parse(r.out);
  REQUIRE(j["rows"].size() == 9);
  CHECK(j["rows"][0]["name"] == "stock");
  for (const auto& row : j["rows"]) {
    CAPTURE(row.dump());
    if (!row["measured"].get<bool>()) {
      const std::string st = row["status"];
      CHECK((st.rfind("skipped: ", 0) == 0 || st == "needs reboot: not measured" ||
             st.rfind("unsupported: ", 0) == 0));
      continue;
    }
    CHECK(row["tok_s"]["median"].get<double>() > 0);
    CHECK(row["tok_s"].contains("spread"));
    CHECK(row["roofline_tok_s"].get<double>() > 0);
    if (row["step"] != 0) {
      CHECK(row["vs_previous"].contains("verdict"));
      CHECK(row["vs_stock"].contains("delta"));
    }
  }
  // Isolation needs a reboot: named in its own row, not measured.
  CHECK(j["rows"][3]["status"] == "needs reboot: not measured");
  // Step 8: speculative decoding on the plan's partition, draft on L3 0-1.
  const auto& spec = j["rows"][8];
  CHECK(spec["name"] == "spec");
  CHECK(spec["measured"] == true);
  CHECK(spec["tokens_per_target_pass"].get<double>() >= 1.0);
  const auto& eng = spec["engine_launch"];
  CHECK(eng["draft_l3"] == json::array({0, 1}));
  CHECK(eng["planned"]["draft_cpus"] == "2-15");
  CHECK(eng["planned"]["draft_group"] == "epyctune-draft");
  CHECK(j["launch_plan"]["draft"]["l3"] == json::array({0, 1}));
  CHECK(j["launch_plan"]["draft"]["cpus"] == "2-15");
  bool draft_in_group = false;
  for (const auto& t : eng["threads"])
    draft_in_group |= t["side"] == "draft" && t["in_group"] == true;
  CHECK(draft_in_group);
  std::ifstream f(svg);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  CHECK(text.rfind("<svg", 0) == 0);
  fs::remove(svg);
}

TEST_CASE("bench: SIGINT in the middle reverts the fixture") {
  Host h;
  const auto before = testing::snapshot_tree(h.dir.path());
  const std::string journal = (h.dir.path() / "var/lib/epyctune/journal").string();
  const std::string model = models().target.string();  // made before the fork
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    execl(EPYCTUNE_BIN, EPYCTUNE_BIN, "--sysroot", h.dir.path().c_str(), "bench", "--profile",
          "9754", "--model", model.c_str(), "--tokens", "8", "--repeat", "500", "--bw-mib", "16",
          nullptr);
    _exit(127);
  }
  // Wait until a step has been applied (the journal exists), then interrupt.
  const auto t0 = std::chrono::steady_clock::now();
  while (!fs::exists(journal) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(fs::exists(journal));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
}

TEST_CASE("bench refuses applied state unless --from-stock") {
  Host h;
  auto a = tuner(h.dir.path(), {"apply", "--profile", "9754", "--steps", "cpufreq"});
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  auto r = tuner(h.dir.path(), {"bench", "--profile", "9754", "--model", models().target.string()});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("pass --from-stock") != std::string::npos);
  auto rv = tuner(h.dir.path(), {"revert"});
  CHECK(rv.exit_code == 0);
}

TEST_CASE("run: refuses an unapplied profile naming the steps, runs on the applied partition") {
  Host h;
  const auto before = testing::snapshot_tree(h.dir.path());
  auto r = tuner(h.dir.path(), {"run", "--profile", "9754", "--model", models().target.string(),
                                "--prompt", "hello", "-n", "4"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("is not applied") != std::string::npos);
  CHECK(r.err.find("8 spec") != std::string::npos);
  auto ok = tuner(h.dir.path(),
                  {"run", "--profile", "9754", "--model", models().target.string(), "--draft",
                   models().draft.string(), "--prompt", "hello", "-n", "4", "--json", "--apply"});
  REQUIRE_MESSAGE(ok.exit_code == 0, ok.err);
  auto j = json::parse(ok.out);
  CHECK(j["launch"]["draft_l3"] == json::array({0, 1}));
  CHECK(j["launch"]["cpus_mapped"] == true);
  // The engine's threads are in the fixture's groups' tasks files.
  for (const auto& t : j["launch"]["threads"]) {
    const std::string group = t["resctrl_group"];
    auto tasks = launch::resctrl_tasks(h.dir.path() / "sys/fs/resctrl", group);
    CHECK(std::find(tasks.begin(), tasks.end(), t["tid"].get<pid_t>()) != tasks.end());
  }
  CHECK(tuner(h.dir.path(), {"revert"}).exit_code == 0);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
}

TEST_CASE(
    "engine: --launch-config pins, joins the groups' tasks and reports it; mismatch refused") {
  testing::ScratchDir d;
  const auto root = d.path() / "resctrl";
  fs::create_directories(root / "g-draft");
  fs::create_directories(root / "g-verify");
  const auto cfg = d.path() / "engine.toml";
  {
    std::ofstream f(cfg);
    f << "[spec]\ndraft_cpus = '100'\nverify_cpus = '101-103'\ndraft_l3 = [0, 1]\n"
         "draft_resctrl_group = 'g-draft'\nverify_resctrl_group = 'g-verify'\n"
         "[models]\ntarget = '"
      << models().target.string() << "'\ndraft = '" << models().draft.string() << "'\n";
  }
  const std::vector<std::string> base{ENGINE_BIN,   "generate",       "--launch-config",
                                      cfg.string(), "--resctrl-root", root.string(),
                                      "--prompt",   "hello",          "-n",
                                      "6",          "--json"};
  // The plan's CPUs are not this machine's: refused unless mapping is asked for.
  auto refused = bench::run_process(base);
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("--map-cpus") != std::string::npos);
  auto args = base;
  args.push_back("--map-cpus");
  auto r = bench::run_process(args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto j = json::parse(r.out);
  const auto& l = j["launch"];
  CHECK(l["cpus_mapped"] == true);
  CHECK(l["draft_l3"] == json::array({0, 1}));
  CHECK(j["bytes_per_token"].get<double>() > 0);
  int draft = 0, verify = 0;
  for (const auto& t : l["threads"]) {
    CHECK(t["error"] == "");
    const std::string group = t["resctrl_group"];
    auto tasks = launch::resctrl_tasks(root, group);
    CHECK(std::find(tasks.begin(), tasks.end(), t["tid"].get<pid_t>()) != tasks.end());
    (group == "g-draft" ? draft : verify)++;
  }
  CHECK(draft >= 1);
  CHECK(verify >= 1);
  // A group that does not exist: the thread cannot join it, and the engine
  // stops with the placement error instead of running outside the group.
  fs::remove_all(root / "g-draft");
  auto bad = bench::run_process(args);
  CHECK(bad.exit_code == 3);
  CHECK(bad.err.find("cannot open to join resctrl group 'g-draft'") != std::string::npos);
}
