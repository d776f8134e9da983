// The daemon's config: strict, and every refusal names the file, the line
// and the fix.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "daemon/config.hpp"
#include "daemon/supervisor.hpp"

using epyctune::daemon::Config;
using epyctune::daemon::ConfigError;
using epyctune::daemon::parse_config;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_config(text, "/etc/epyctune/epyctune.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const char* kFull = R"(profile = "epyc-9754"
steps = "bios,numa"
revert_on_stop = true
metrics_textfile = "/var/lib/node-exporter/epyctune.prom"

[drift]
interval_s = 60
repair = true
uevents = false
debounce_ms = 500

[engine]
map_cpus = true
stop_timeout_s = 5

[[instance]]
name = "big"
model = "/models/70b.gguf"
draft = "/models/1b.gguf"
port = 8081
queue = 4
parallel = 8
kv_budget = "16G"

[[instance]]
name = "small"
model = "/models/7b.gguf"
port = 8082
cpus = "100-107"
)";

}  // namespace

TEST_CASE("a full config parses into every key") {
  Config c = parse_config(kFull, "f.toml");
  CHECK(c.profile == "epyc-9754");
  CHECK(c.steps == "bios,numa");
  CHECK(c.revert_on_stop);
  CHECK_FALSE(c.revert_on_shutdown);
  CHECK(c.apply_on_start);
  CHECK(c.metrics_textfile == "/var/lib/node-exporter/epyctune.prom");
  CHECK(c.drift.interval_s == 60);
  CHECK(c.drift.repair);
  CHECK_FALSE(c.drift.uevents);
  CHECK(c.drift.debounce_ms == 500);
  CHECK(c.engine.map_cpus);
  CHECK(c.engine.stop_timeout_s == 5);
  REQUIRE(c.instances.size() == 2);
  CHECK(c.instances[0].name == "big");
  CHECK(c.instances[0].draft == "/models/1b.gguf");
  CHECK(c.instances[0].queue == 4);
  CHECK(c.instances[0].parallel == 8);
  CHECK(c.instances[0].kv_budget == "16G");
  CHECK(c.instances[1].parallel == 0);  // the engine's default
  CHECK(c.instances[1].kv_budget.empty());
  CHECK(c.instances[0].host == "127.0.0.1");
  CHECK(c.instances[0].line == 16);  // the [[instance]] header
  CHECK(c.instances[1].cpus == "100-107");
}

TEST_CASE("a minimal config takes the documented defaults") {
  Config c = parse_config("profile = \"epyc-9354\"\n", "f.toml");
  CHECK(c.drift.interval_s == 300);
  CHECK_FALSE(c.drift.repair);
  CHECK(c.drift.uevents);
  CHECK_FALSE(c.revert_on_stop);
  CHECK(c.metrics_textfile.empty());
  CHECK(c.instances.empty());
}

TEST_CASE("bad keys, types and values name the file, the line and the fix") {
  auto e = error_of("profile = \"x\"\nrevert_on_stp = true\n");
  CHECK(e.find("/etc/epyctune/epyctune.toml:2:") == 0);
  CHECK(e.find("unknown key 'revert_on_stp'") != std::string::npos);
  CHECK(e.find("docs/daemon.md") != std::string::npos);

  e = error_of("profile = \"x\"\n[drift]\ninterval_s = \"60\"\n");
  CHECK(e.find(":3: [drift] 'interval_s' must be an integer") != std::string::npos);

  e = error_of("profile = \"x\"\n[drift]\ninterval_s = -5\n");
  CHECK(e.find(":3:") != std::string::npos);
  CHECK(e.find("out of range: use a value from 0 to") != std::string::npos);

  e = error_of("profile = \"x\"\nrevert_on_stop = \"yes\"\n");
  CHECK(e.find(":2: 'revert_on_stop' must be true or false") != std::string::npos);

  e = error_of("steps = \"1\"\n");
  CHECK(e.find("missing key 'profile'") != std::string::npos);

  e = error_of("profile = \"x\"\nmetrics_textfile = \"rel.prom\"\n");
  CHECK(e.find(":2: 'metrics_textfile' must be an absolute path") != std::string::npos);

  e = error_of("profile = \"x\"\n[[instance]]\nname = \"a\"\nmodel = \"m\"\nprot = 1\n");
  CHECK(e.find(":5: [[instance]] #1: unknown key 'prot'") != std::string::npos);

  e = error_of("profile = \"x\"\n[[instance]]\nname = \"a b\"\nmodel = \"m\"\n");
  CHECK(e.find(":3:") != std::string::npos);
  CHECK(e.find("letters, digits") != std::string::npos);

  e = error_of("profile = \"x\"\n[[instance]]\nname = \"a\"\nmodel = \"m\"\ncpus = \"4-x\"\n");
  CHECK(e.find(":5:") != std::string::npos);
  CHECK(e.find("a CPU list such as") != std::string::npos);

  e = error_of("profile = \"x\"\nprofile = \"y\"\n");
  CHECK(e.find(":2:") != std::string::npos);
  CHECK(e.find("not valid TOML") != std::string::npos);

  e = error_of("profile = \"x\"\n[[instance]]\nname = \"a\"\nmodel = \"m\"\ndraft_cpus = \"1\"\n");
  CHECK(e.find("has no 'draft' model") != std::string::npos);
}

TEST_CASE("instances: duplicate names, ports and overlapping CPU lists are refused") {
  const std::string head = "profile = \"x\"\n";
  auto e = error_of(head +
                    "[[instance]]\nname = \"a\"\nmodel = \"m\"\nport = 1\n"
                    "[[instance]]\nname = \"a\"\nmodel = \"m\"\nport = 2\n");
  CHECK(e.find(":6: [[instance]] name \"a\" is used twice") != std::string::npos);

  e = error_of(head +
               "[[instance]]\nname = \"a\"\nmodel = \"m\"\nport = 1\n"
               "[[instance]]\nname = \"b\"\nmodel = \"m\"\nport = 1\n");
  CHECK(e.find(":6: [[instance]] b: port 1 is already used by instance a") != std::string::npos);

  e = error_of(head +
               "[[instance]]\nname = \"a\"\nmodel = \"m\"\nport = 1\ncpus = \"8-15\"\n"
               "[[instance]]\nname = \"b\"\nmodel = \"m\"\nport = 2\ncpus = \"15-20\"\n");
  CHECK(e.find(":7: [[instance]] b: cpus overlaps a.cpus on CPU 15") != std::string::npos);
  CHECK(e.find("disjoint") != std::string::npos);
}

TEST_CASE("the packaged default config parses and holds the documented defaults") {
  auto c = epyctune::daemon::load_config(EPYCTUNE_SOURCE_DIR "/packaging/config/epyctune.toml");
  Config d;
  CHECK(c.profile == "epyc-9754");
  CHECK(c.apply_on_start == d.apply_on_start);
  CHECK(c.revert_on_stop == d.revert_on_stop);
  CHECK(c.revert_on_shutdown == d.revert_on_shutdown);
  CHECK(c.metrics_textfile == d.metrics_textfile);
  CHECK(c.drift == d.drift);
  CHECK(c.engine == d.engine);
  CHECK(c.instances.empty());
}

TEST_CASE("an instance's parallel and KV budget reach serve's argv, and are bounded") {
  Config c = parse_config(kFull, "f.toml");
  epyctune::daemon::InstancePlan p;
  p.cfg = c.instances[0];
  epyctune::daemon::SupervisorOptions o;
  o.engine = "/usr/bin/epyctune-engine";
  auto argv = epyctune::daemon::serve_argv(p, o);
  auto it = std::find(argv.begin(), argv.end(), "--parallel");
  REQUIRE(it != argv.end());
  CHECK(*(it + 1) == "8");
  it = std::find(argv.begin(), argv.end(), "--kv-budget");
  REQUIRE(it != argv.end());
  CHECK(*(it + 1) == "16G");
  // Neither set: serve chooses (4 slots, 1 with a draft).
  p.cfg = c.instances[1];
  argv = epyctune::daemon::serve_argv(p, o);
  CHECK(std::find(argv.begin(), argv.end(), "--parallel") == argv.end());
  CHECK(std::find(argv.begin(), argv.end(), "--kv-budget") == argv.end());
  const std::string head =
      "profile = \"epyc-9354\"\n[[instance]]\nname = \"a\"\nmodel = \"/m.gguf\"\n";
  CHECK_THROWS_WITH_AS(parse_config(head + "parallel = 257\n", "f.toml"),
                       doctest::Contains("f.toml:5"), ConfigError);
  for (const char* bad : {"\"2X\"", "\"-1G\"", "\"0tok\"", "\"1e30G\"", "\"inf\""}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_config(head + "kv_budget = " + bad + "\n", "f.toml"),
                         doctest::Contains("f.toml:5: [[instance]] #1: 'kv_budget'"), ConfigError);
  }
  CHECK(parse_config(head + "kv_budget = \"65536tok\"\n", "f.toml").instances[0].kv_budget ==
        "65536tok");
}
