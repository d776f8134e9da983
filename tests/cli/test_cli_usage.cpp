// Issue 33, the command line as typed: a mistyped command or option is named
// with what was meant (in all three binaries), one spelling per concept with
// the others kept as aliases, and `profile list` marking the active profile.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_host.hpp"
#include "common/did_you_mean.hpp"
#include "common/exit_codes.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;

TEST_CASE("did you mean: the nearest known word, or nothing when none is near") {
  CHECK(common::edit_distance("aply", "apply") == 1);
  CHECK(common::edit_distance("stauts", "status") == 1);  // a swap is one edit
  CHECK(common::did_you_mean("aply", {"plan", "apply", "verify"}) == "did you mean 'apply'?");
  CHECK(common::did_you_mean("--profle", {"--steps", "--profile", "--json"}) ==
        "did you mean '--profile'?");
  CHECK(common::did_you_mean("rn", {"run", "bench"}) == "did you mean 'run'?");
  CHECK(common::did_you_mean("pla", {"plan", "play"}) == "did you mean 'plan' or 'play'?");
  CHECK(common::did_you_mean("frobnicate", {"plan", "apply", "verify"}).empty());
  CHECK(common::did_you_mean("-x", {"-n", "-v"}).empty());  // too short to guess
}

TEST_CASE("cli: a mistyped command or option is named, not reported as a missing one") {
  // Before: "A subcommand is required" and "--profile is required".
  auto cmd = cli({"aply"});
  CHECK(cmd.code == kExitError);
  CHECK(has(cmd.err, "epyctune: unknown command 'aply' (did you mean 'apply'?)"));
  CHECK_FALSE(has(cmd.err, "A subcommand is required"));
  auto opt = cli({"plan", "--profle", "9754"});
  CHECK(opt.code == kExitError);
  CHECK(has(opt.err, "epyctune plan: unknown option '--profle' (did you mean '--profile'?)"));
  CHECK_FALSE(has(opt.err, "--profile is required"));
  auto nested = cli({"profile", "lst"});
  CHECK(has(nested.err, "epyctune profile: unknown command 'lst' (did you mean 'list'?)"));
  auto value = cli({"plan", "--profile=9754", "--chanegd-only"});
  CHECK(has(value.err, "unknown option '--chanegd-only' (did you mean '--changed-only'?)"));
  // A global option after the subcommand is known there; the typo after it is not.
  auto global = cli({"verify", "--sysroot", "/nonexistent", "--jsn"});
  CHECK(has(global.err, "epyctune verify: unknown option '--jsn' (did you mean '--json'?)"));
  auto far = cli({"frobnicate"});
  CHECK(far.code == kExitError);
  CHECK(has(far.err, "unknown command 'frobnicate'\n"));  // no guess for an unrelated word
  auto format = cli({"verify", "--profile", "9754", "--format", "jsn"});
  CHECK(has(format.err, "unknown format 'jsn' (did you mean 'json'?)"));
  // What was right before stays right: a missing required option is still named.
  CHECK(has(cli({"plan"}).err, "--profile is required"));
}

TEST_CASE("epyctune-engine and epyctuned name a mistyped command or option too") {
  auto engine = run_cli(ENGINE_BIN, {"generat"});
  CHECK(engine.code != 0);
  CHECK(has(engine.err, "epyctune-engine: unknown command 'generat' (did you mean 'generate'?)"));
  if (std::string(EPYCTUNED_BIN).empty()) return;  // a tree built without the daemon
  auto daemon = run_cli(EPYCTUNED_BIN, {"--conifg", "/nonexistent"});
  CHECK(daemon.code != 0);
  CHECK(has(daemon.err, "epyctuned: unknown option '--conifg' (did you mean '--config'?)"));
}

TEST_CASE("cli: --json and --format json are one option wherever there is JSON output") {
  CliHost h("9354");
  // verify refused --json before, though the README promised it.
  auto verify_json = h.run({"verify", "--profile", "9354", "--json"});
  auto verify_format = h.run({"verify", "--profile", "9354", "--format", "json"});
  CHECK(verify_json.code == kExitFailed);  // drift on a fresh fixture, not a usage error
  CHECK(json::parse(verify_json.out) == json::parse(verify_format.out));
  CHECK(h.run({"verify", "--profile", "9354", "--json", "--format", "md"}).code == kExitError);
  // The commands that had only --json take --format json, byte for byte the same.
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"plan", "--profile", "9354"},
                                             {"status"},
                                             {"detect"},
                                             {"profile", "list"},
                                             {"profile", "show", "9354"},
                                             {"apply", "--profile", "9354", "--check"}}) {
    CAPTURE(args.front());
    auto with = [&](std::vector<std::string> extra) {
      auto a = args;
      a.insert(a.end(), extra.begin(), extra.end());
      return h.run(a);
    };
    auto a = with({"--json"});
    auto b = with({"--format", "json"});
    CHECK(a.code == b.code);
    CHECK(a.out == b.out);
    CHECK(json::parse(b.out).is_structured());
    CHECK(with({"--format", "text"}).out != a.out);
    CHECK(with({"--format", "yaml"}).code == kExitError);
    CHECK(with({"--json", "--format", "text"}).code == kExitError);  // one or the other
  }
  CHECK(h.run({"revert", "--format", "json"}).out == h.run({"revert", "--json"}).out);
}

TEST_CASE("cli: run and bench take the engine's spellings: -md/--model-draft, -n/--tokens") {
  CliHost h("9354");
  auto model = (h.dir.path() / "t.gguf").string(), draft = (h.dir.path() / "d.gguf").string();
  std::ofstream(model) << "GGUF";
  std::ofstream(draft) << "GGUF";
  // The options parse; what stops each run is the host (not applied, mismatch).
  for (const auto& d : std::vector<std::string>{"--draft", "--model-draft", "-md"})
    for (const auto& n : std::vector<std::string>{"-n", "--tokens"}) {
      CAPTURE(d);
      CAPTURE(n);
      auto run =
          h.run({"run", "--profile", "9354", "--model", model, d, draft, n, "8", "--prompt", "hi"});
      CHECK(run.code == kExitError);
      CHECK(has(run.err, "is not applied on this host"));
      auto bench = h.run({"bench", "--profile", "9754", "--model", model, d, draft, n, "8"});
      CHECK(bench.code == kExitError);
      CHECK(has(bench.err, "epyctune bench: "));
      CHECK_FALSE(has(bench.err, "unknown option"));
    }
  CHECK(has(cli({"bench", "--help"}).out, "-n,--tokens"));
  CHECK(has(cli({"run", "--help"}).out, "--draft,--model-draft"));
  CHECK(has(cli({"profile", "generate", "--help"}).out, "--draft,--model-draft"));
}

TEST_CASE("cli: profile list marks the active profile, as tuned-adm list does") {
  CliHost h("9354");
  auto before = h.run({"profile", "list"});
  CHECK(before.code == kExitOk);
  CHECK(has(before.out, "No profile is applied."));
  CHECK_FALSE(has(before.out, " active "));
  for (const auto& p : json::parse(h.run({"profile", "list", "--json"}).out))
    CHECK(p["active"] == false);

  REQUIRE(h.run({"apply", "--profile", "9354"}).code == kExitOk);
  auto after = h.run({"profile", "list"});
  std::string row = after.out.substr(after.out.find("\nepyc-9354 ") + 1);
  row = row.substr(0, row.find('\n'));
  CHECK(has(row, "  active  "));
  CHECK(has(after.out, "\nepyc-9754 "));  // names stay first on their lines
  CHECK(has(after.out, "Active profile: epyc-9354\n"));
  int active = 0;
  for (const auto& p : json::parse(h.run({"profile", "list", "--json"}).out))
    if (p["active"] == true) {
      ++active;
      CHECK(p["name"] == "epyc-9354");
    }
  CHECK(active == 1);
}
