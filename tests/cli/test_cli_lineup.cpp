// The current lineup through the binary: on each new fixture machine apply,
// verify and revert round-trip byte for byte with its built-in profile; a
// machine without a built-in does the same with the profile `profile
// generate` writes; Zen 5's PrefetchControl keeps its undocumented bits.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"
#include "stack/tree_snapshot.hpp"

using namespace epyctune;
using namespace epyctune::testing;
namespace fs = std::filesystem;

namespace {

struct Host {
  ScratchDir dir;
  explicit Host(fixture::FixtureOptions o) { fixture::create_fixture(dir.path(), o); }
  std::string root() const { return dir.path().string(); }
  CliRun run(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--sysroot", root()});
    return run_cli(EPYCTUNE_BIN, args);
  }
};

fixture::FixtureOptions opts(const std::string& machine, const std::string& driver, bool smt,
                             int nps = 1) {
  fixture::FixtureOptions o;
  o.machine = machine;
  o.cpufreq_driver = driver;
  o.smt = smt;
  o.nps = nps;
  return o;
}

// apply -> verify passes -> apply again changes nothing -> revert -> the
// tree as it was, byte for byte.
void round_trip(const Host& h, const std::string& profile) {
  CAPTURE(profile);
  const auto before = snapshot_tree(h.dir.path());
  auto pre = h.run({"verify", "--profile", profile});
  CHECK(pre.code == kExitFailed);  // an untuned host does not verify
  auto apply = h.run({"apply", "--profile", profile});
  REQUIRE_MESSAGE(apply.code == kExitOk, (apply.out + apply.err));
  auto verify = h.run({"verify", "--profile", profile});
  CHECK_MESSAGE(verify.code == kExitOk, (verify.out + verify.err));
  auto again = h.run({"apply", "--profile", profile, "--json"});
  CHECK(again.code == kExitOk);
  CHECK(nlohmann::json::parse(again.out)["changed"] == false);
  auto revert = h.run({"revert"});
  CHECK_MESSAGE(revert.code == kExitOk, (revert.out + revert.err));
  CHECK(diff_trees(before, snapshot_tree(h.dir.path())) == "");
}

uint64_t read_msr(const Host& h, int cpu, uint32_t address) {
  std::ifstream f(h.dir.path() / fmt::format("dev/cpu/{}/msr", cpu), std::ios::binary);
  f.seekg(address);
  unsigned char b[8] = {};
  f.read(reinterpret_cast<char*>(b), 8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | b[i];
  return v;
}

}  // namespace

TEST_CASE("lineup: apply, verify, revert byte for byte with each built-in") {
  // Each cpufreq driver and both SMT states appear at least once.
  const struct {
    const char* machine;
    const char* profile;
    const char* driver;
    bool smt;
  } lineup[] = {
      {"9655", "9655", "amd-pstate-active", true},
      {"9755", "9755", "acpi-cpufreq", false},
      {"9965", "9965", "amd-pstate-passive", false},
      {"9654", "9654", "acpi-cpufreq", false},
      {"9654-2s", "9654-2s", "amd-pstate-active", false},
      {"7763-2s", "7763", "amd-pstate-passive", true},
  };
  for (const auto& m : lineup) {
    CAPTURE(m.machine);
    Host h(opts(m.machine, m.driver, m.smt));
    round_trip(h, m.profile);
  }
}

TEST_CASE("lineup: a machine without a built-in, with the profile generate writes") {
  Host h(opts("7451-2s", "acpi-cpufreq", true, 4));
  auto detect = h.run({"detect"});
  REQUIRE(detect.code == kExitOk);
  const std::string file = h.root() + "/etc/epyctune/profiles/epyc-7451-2s-generated.toml";
  std::string cmd = "epyctune profile generate --sysroot " + h.root() + " -o " + file;
  CHECK(has(detect.out, cmd));
  auto gen = run_cli(EPYCTUNE_BIN, {"profile", "generate", "--sysroot", h.root(), "-o", file});
  REQUIRE_MESSAGE(gen.code == kExitOk, gen.err);
  CHECK(has(gen.out, "profile epyc-7451-2s-generated"));
  // Not overwritten without --force.
  auto twice = run_cli(EPYCTUNE_BIN, {"profile", "generate", "--sysroot", h.root(), "-o", file});
  CHECK(twice.code == kExitError);
  CHECK(has(twice.err, "--force"));
  auto val = h.run({"profile", "validate", file});
  CHECK_MESSAGE(val.code == kExitOk, val.err);
  // The override directory makes it a name `plan` takes; every step is planned.
  auto plan = h.run({"plan", "--profile", "epyc-7451-2s-generated", "--json"});
  REQUIRE_MESSAGE(plan.code == kExitOk, plan.err);
  auto j = nlohmann::json::parse(plan.out);
  CHECK(j["launch"]["draft"]["l3"] == nlohmann::json::array({0, 1}));
  CHECK(j["launch"]["draft"]["cpus"] == "1-5");  // die 0 less housekeeping core 0
  std::vector<std::string> steps;
  for (const auto& s : j["steps"]) steps.push_back(s["name"]);
  // Naples has neither L3 CAT nor PrefetchControl: the profile turns those steps off.
  CHECK(steps ==
        std::vector<std::string>{"bios", "numa", "isolation", "cpufreq", "weights", "spec"});
  // The profile is part of the tree now: the round trip compares with it in.
  round_trip(h, "epyc-7451-2s-generated");
}

TEST_CASE("lineup: a generated profile on a lineup machine round-trips too") {
  Host h(opts("9965", "amd-pstate-active", false, 2));
  const fs::path file = h.dir.path().parent_path() / (h.dir.path().filename().string() + ".toml");
  auto gen = h.run({"profile", "generate", "-o", file.string()});
  REQUIRE_MESSAGE(gen.code == kExitOk, gen.err);
  round_trip(h, file.string());
  fs::remove(file);
}

TEST_CASE("Zen 5: PrefetchControl is read-modify-written; bits 6-9 (reset 0x3C0) stay") {
  Host h(opts("9655", "acpi-cpufreq", false));
  REQUIRE(read_msr(h, 2, 0xC0000108) == 0x3C0);
  const fs::path file = h.dir.path().parent_path() / (h.dir.path().filename().string() + ".toml");
  std::ofstream(file) << "include = \"9655\"\nname = \"l2updown-off\"\n[prefetch]\nvalue = 0x20\n";
  auto apply = h.run({"apply", "--profile", file.string(), "--steps", "prefetch"});
  REQUIRE_MESSAGE(apply.code == kExitOk, apply.err);
  CHECK(read_msr(h, 2, 0xC0000108) == 0x3E0);  // L2UpDown off, firmware's bits kept
  CHECK(read_msr(h, 0, 0xC0000108) == 0x3C0);  // housekeeping CPU untouched
  CHECK(h.run({"revert"}).code == kExitOk);
  CHECK(read_msr(h, 2, 0xC0000108) == 0x3C0);
  // A mask reaching the undocumented bits is refused when the profile loads.
  std::ofstream(file) << "include = \"9655\"\nname = \"wide\"\n[prefetch]\nmask = 0x3EF\n";
  auto wide = h.run({"plan", "--profile", file.string()});
  CHECK(wide.code == kExitError);
  CHECK(has(wide.err, "prefetch.mask = 0x3ef"));
  CHECK(has(wide.err, "0x3c0"));
  fs::remove(file);
}

TEST_CASE("profile generate: standard output, and bad model files named") {
  Host h(opts("7451-2s", "acpi-cpufreq", false));
  auto out = h.run({"profile", "generate"});
  REQUIRE_MESSAGE(out.code == kExitOk, out.err);
  CHECK(out.out.rfind("# Generated by `epyctune profile generate --sysroot " + h.root(), 0) == 0);
  const fs::path junk = h.dir.path() / "etc/default/grub.d/junk.gguf";
  std::ofstream(junk) << "not a model";
  auto bad = h.run({"profile", "generate", "--model", junk.string()});
  CHECK(bad.code == kExitError);
  CHECK(has(bad.err, "--model " + junk.string() + ": not a GGUF file"));
  auto missing = h.run({"profile", "generate", "--model-draft", "/nonexistent/d.gguf"});
  CHECK(missing.code == kExitError);
  CHECK(has(missing.err, "--model-draft /nonexistent/d.gguf: No such file or directory"));
  auto name = h.run({"profile", "generate", "--name", "../x"});
  CHECK(name.code == kExitError);
  CHECK(has(name.err, "--name"));
}
