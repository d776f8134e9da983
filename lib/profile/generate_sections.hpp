// Internal to lib/profile: the profile generator's writer and the host as
// it sees it, shared by generate.cpp (decisions) and generate_sections.cpp
// (one function per TOML section, each value with its reason).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "profile/generate.hpp"
#include "profile/generate_facts.hpp"

namespace epyctune::profile::detail {

// One TOML file, written key by key, each with the reason for its value.
class TomlOut {
 public:
  void comment(const std::string& text) { out_ += "# " + text + "\n"; }
  void section(const std::string& name) { out_ += "\n[" + name + "]\n"; }
  void kv(const std::string& key, const std::string& literal, const std::string& why);
  void raw(const std::string& text) { out_ += text; }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

std::string toml_string(std::string_view s);             // a TOML basic string
std::string clean(std::string_view s, size_t max = 96);  // printable ASCII, trimmed, cut
std::string ints(const std::vector<int>& v);             // "[0, 1]"
double gib(uint64_t bytes);
// "the draft FILE (1.23 GB)", or "the default 1B Q4_0 draft (0.7 GB)"; the
// last word of `what` names the role.
std::string model_what(const ModelSize& m, uint64_t fallback, const char* what);

// The host as the generator sees it, with the decisions the sections share.
struct GenHost {
  const host::Topology& t;
  const HostFacts& facts;
  const GenerateOptions& opt;
  Generation gen;
  std::vector<int> socket0_domains;  // L3 indices on socket 0, in order
  int l3_per_ccd = 1;                // as used for this host (1 when the count does not divide)
  uint64_t l3_bytes = 0;             // per domain
  uint64_t target_bytes = 0, draft_bytes = 0;
  std::vector<int> housekeeping;  // core ids
  std::vector<int> draft;         // L3 indices
  std::string draft_why;
};

void hardware_section(TomlOut& o, const GenHost& h);
void partition_section(TomlOut& o, const GenHost& h);
void bios_section(TomlOut& o, const GenHost& h);
void numa_section(TomlOut& o, const GenHost& h);  // throws GenerateError: models too large
void isolation_section(TomlOut& o);
void cat_section(TomlOut& o, const GenHost& h);
void cpufreq_section(TomlOut& o, const GenHost& h, const HostPartition& part);
void prefetch_section(TomlOut& o, const GenHost& h);
void engine_sections(TomlOut& o);  // [weights], [spec], [engine]
void expectations_section(TomlOut& o, const GenHost& h);

}  // namespace epyctune::profile::detail
