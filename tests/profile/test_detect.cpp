#include <doctest/doctest.h>

#include "fixture/fixture_cache.hpp"
#include "profile/detect.hpp"

using namespace epyctune;
using epyctune::testing::cached_fixture;
using nlohmann::json;

namespace {

enum class T { Int, Bool, Str, Arr, Obj, StrOrNull };

void has(const json& j, const std::string& key, T t) {
  INFO("key ", key);
  REQUIRE(j.contains(key));
  const json& v = j.at(key);
  switch (t) {
    case T::Int:
      CHECK(v.is_number_integer());
      break;
    case T::Bool:
      CHECK(v.is_boolean());
      break;
    case T::Str:
      CHECK(v.is_string());
      break;
    case T::Arr:
      CHECK(v.is_array());
      break;
    case T::Obj:
      CHECK(v.is_object());
      break;
    case T::StrOrNull:
      CHECK((v.is_string() || v.is_null()));
      break;
  }
}

// docs/json/detect.md, key by key.
void check_schema(const json& j) {
  has(j, "schema_version", T::Int);
  CHECK(j["schema_version"] == 1);
  has(j, "source", T::Str);
  has(j, "cpu", T::Obj);
  has(j, "topology", T::Obj);
  has(j, "capabilities_probed", T::Bool);
  has(j, "capabilities", T::Obj);
  has(j, "profiles", T::Arr);
  has(j, "recommendation", T::Obj);
  const json& cpu = j["cpu"];
  for (auto k : {"vendor", "brand", "os_model_name", "codename", "microarch", "identity_source"})
    has(cpu, k, T::Str);
  for (auto k : {"family", "model", "stepping"}) has(cpu, k, T::Int);
  for (auto k : {"prefetch_control", "hypervisor"}) has(cpu, k, T::Bool);
  has(cpu, "flags", T::Arr);
  const json& t = j["topology"];
  has(t, "source", T::Str);
  for (auto k : {"sockets", "cores", "cpus", "threads_per_core", "nodes_per_socket"})
    has(t, k, T::Int);
  has(t, "online_cpus", T::Str);
  for (auto k : {"socket_list", "numa_nodes", "l3_domains"}) has(t, k, T::Arr);
  for (const auto& s : t["socket_list"]) {
    has(s, "socket", T::Int);
    has(s, "cpus", T::Str);
    has(s, "numa_nodes", T::Arr);
    has(s, "l3_domains", T::Arr);
  }
  for (const auto& n : t["numa_nodes"]) {
    for (auto k : {"node", "socket", "memory_bytes"}) has(n, k, T::Int);
    has(n, "cpus", T::Str);
  }
  REQUIRE_FALSE(t["l3_domains"].empty());
  for (const auto& d : t["l3_domains"]) {
    for (auto k : {"index", "cache_id", "socket", "numa_node", "size_bytes"}) has(d, k, T::Int);
    for (auto k : {"cores", "cpus"}) has(d, k, T::Str);
    has(d, "synthetic", T::Bool);
  }
  const json& c = j["capabilities"];
  for (auto k : {"smt_control", "cpufreq", "resctrl", "msr", "prefetch_control", "hugepages_2m",
                 "hugepages_1g", "numa_balancing", "thp", "irq_affinity"}) {
    has(c, k, T::Obj);
    has(c[k], "supported", T::Bool);
    has(c[k], "reason", T::Str);
    has(c[k], "detail", T::Str);
    if (!c[k]["supported"].get<bool>()) CHECK_FALSE(c[k]["reason"].get<std::string>().empty());
  }
  for (auto k : {"cpufreq_driver", "governor", "amd_pstate_mode", "smt_state", "isolated_cpus",
                 "nohz_full_cpus", "cmdline", "cbm_mask", "lockdown", "thp_mode"})
    has(c, k, T::Str);
  has(c, "governors", T::Arr);
  for (auto k : {"num_closids", "min_cbm_bits", "irqs", "managed_irqs"}) has(c, k, T::Int);
  for (auto k : {"resctrl_kernel", "resctrl_mounted", "root", "cap_sys_rawio", "numa_balancing_on"})
    has(c, k, T::Bool);
  CHECK(j["profiles"].size() == profile::list_profiles().size());
  has(j["recommendation"], "generate_command", T::StrOrNull);
  for (const auto& p : j["profiles"]) {
    has(p, "name", T::Str);
    has(p, "aliases", T::Arr);
    has(p, "matches", T::Bool);
    has(p, "score", T::Int);
    has(p, "reasons", T::Arr);
    has(p, "mismatches", T::Arr);
  }
  has(j["recommendation"], "profile", T::StrOrNull);
  has(j["recommendation"], "note", T::Str);
}

}  // namespace

TEST_CASE("detect JSON on each fixture: schema and recommendation") {
  for (auto [machine, name] :
       {std::pair{"9754", "epyc-9754"}, {"9354", "epyc-9354"}, {"7543-2s", "epyc-7543-2s"}}) {
    host::Sysroot root(cached_fixture(machine));
    auto r = profile::run_detect(root, {});
    json j = profile::detect_to_json(r);
    check_schema(j);
    CHECK(j["recommendation"]["profile"] == name);
    CHECK(j["profiles"][0]["name"] == name);
    CHECK(j["profiles"][0]["score"] == 100);
    CHECK(j["capabilities_probed"] == true);
    auto text = profile::detect_to_text(r);
    CHECK(text.find(std::string("Recommendation: this host is what ") + name) != std::string::npos);
  }
}

TEST_CASE("detect on the live host: nothing is assumed to fit, and the note says why") {
  auto r = profile::run_detect(host::Sysroot("/"), {});
  json j = profile::detect_to_json(r);
  check_schema(j);
  CHECK(j["source"] == "live");
  if (j["recommendation"]["profile"].is_null())
    CHECK(j["recommendation"]["note"].get<std::string>().find("no built-in profile fits") == 0);
}

TEST_CASE("profile show JSON carries every section and the origins") {
  json j = profile::profile_to_json(profile::load_profile("9754"));
  for (auto k : {"hardware", "partition", "bios", "numa", "isolation", "cat", "cpufreq", "prefetch",
                 "weights", "spec", "engine", "expectations", "origins"})
    has(j, k, T::Obj);
  CHECK(j["numa"]["hugepages_2m_per_node"] == "auto");
  CHECK(j["hardware"]["l3_mib"] == 16);
  CHECK(j["origins"]["partition.draft_l3"].get<std::string>().rfind("profiles/epyc-9754.toml:",
                                                                    0) == 0);
  auto text = profile::profile_to_text(profile::load_profile("9754"));
  CHECK(text.find("draft_l3 = [0,1]") != std::string::npos);
  CHECK(text.find("16 L3 domains") != std::string::npos);
}
