// The profile schema: the top level and the profile-wide sections. The steps'
// sections are described with the same kit (section.hpp); profiles/README.md
// documents the schema for people.
#include "profile/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/cpulist.hpp"
#include "profile/section.hpp"

namespace epyctune::profile::detail {

namespace {

Section hardware_section() {
  Keys<Hardware> k;
  k.choice("vendor", &Hardware::vendor, {"AuthenticAMD", "GenuineIntel"})
      .integer("family", &Hardware::family, 0, 255)
      .ints("models", &Hardware::models, 0, 255)
      .text("codename", &Hardware::codename, kShortText)
      .text("brand_contains", &Hardware::brand_contains, kShortText)
      .integer("sockets", &Hardware::sockets, 1, 8)
      .integer("cores_per_socket", &Hardware::cores_per_socket, 0, 1024)
      .integer("l3_domains_per_socket", &Hardware::l3_domains_per_socket, 0, 256)
      .integer("ccds_per_socket", &Hardware::ccds_per_socket, 0, 64)
      .integer("cores_per_l3", &Hardware::cores_per_l3, 0, 256)
      .custom(
          "l3_mib",
          [](KeyReader& r, const char* key, Hardware& h) {
            int64_t mib = -1;
            r.get_int(key, mib, 0, 4096);
            if (mib >= 0) h.l3_bytes = static_cast<uint64_t>(mib) << 20;
          },
          [](const Hardware& h) { return nlohmann::json(h.l3_bytes >> 20); })
      .integer("memory_channels", &Hardware::memory_channels, 0, 64)
      .text("memory_type", &Hardware::memory_type, kShortText)
      .number("memory_bandwidth_gbs", &Hardware::memory_bandwidth_gbs, 0, 10000)
      .ints("nps_supported", &Hardware::nps_supported, 0, 4)
      // Shown after the keys, one per line: they are sentences.
      .texts("notes", &Hardware::notes, 64, kLongText, ShowAs::Hidden);
  auto check = [](const Hardware& h, const Profile&, Checker& c) {
    if (h.cores_per_socket && h.l3_domains_per_socket && h.cores_per_l3 &&
        h.cores_per_socket != h.l3_domains_per_socket * h.cores_per_l3)
      c.error("hardware.cores_per_socket",
              fmt::format("{} cores per socket != {} L3 domains x {} cores", h.cores_per_socket,
                          h.l3_domains_per_socket, h.cores_per_l3),
              "make cores_per_socket = l3_domains_per_socket x cores_per_l3");
    if (h.ccds_per_socket && h.l3_domains_per_socket && h.l3_domains_per_socket % h.ccds_per_socket)
      c.error("hardware.l3_domains_per_socket", "L3 domains are not a whole number per CCD",
              "a CCD holds one CCX (Zen 3/4) or two (Zen 4c)");
  };
  return section_of("hardware", field(&Profile::hardware), k, check);
}

void check_partition(const Partition& part, const Profile&, Checker& c) {
  if (part.draft_l3.empty())
    c.error("partition.draft_l3", "the draft has no L3 domains",
            "name the L3 domains (CCXs) the draft runs on, e.g. draft_l3 = [0]");
  std::set<int> draft(part.draft_l3.begin(), part.draft_l3.end());
  if (draft.size() != part.draft_l3.size())
    c.error("partition.draft_l3", "an L3 domain is listed twice", "list each domain once");
  for (int v : part.verify_l3)
    if (draft.count(v))
      c.error("partition.verify_l3", fmt::format("L3 domain {} is both draft and verify", v),
              "remove it from one of draft_l3 / verify_l3");
}

void check_partition_host(const Partition& part, const Profile&, const CheckHost& h, Checker& c) {
  if (!h.topo) return;
  const host::Topology& t = *h.topo;
  int ndom = static_cast<int>(t.l3_domains.size());
  // One error per key, however many entries are wrong: a list such as
  // "0-8191" on a 64-CPU host is one mistake.
  auto check_domains = [&](const char* key, const std::vector<int>& v) {
    std::vector<int> bad;
    for (int d : v)
      if (d >= ndom) bad.push_back(d);
    if (!bad.empty())
      c.error(key,
              fmt::format("L3 domain{} {} {} not exist: this host has {} (0-{})",
                          bad.size() > 1 ? "s" : "", common::format_cpulist(bad),
                          bad.size() > 1 ? "do" : "does", ndom, ndom - 1),
              "use L3 domain indices of this host (epyctune detect lists them)");
  };
  check_domains("partition.draft_l3", part.draft_l3);
  check_domains("partition.verify_l3", part.verify_l3);
  std::vector<int> bad_cores;
  for (int core : part.housekeeping_cores)
    if (core >= t.n_cores()) bad_cores.push_back(core);
  if (!bad_cores.empty())
    c.error("partition.housekeeping_cores",
            fmt::format("core{} {} {} not exist: this host has {} cores (0-{})",
                        bad_cores.size() > 1 ? "s" : "", common::format_cpulist(bad_cores),
                        bad_cores.size() > 1 ? "do" : "does", t.n_cores(), t.n_cores() - 1),
            "use core indices of this host");
  std::vector<int> offline;
  for (int cpu : part.housekeeping_cpus)
    if (!std::binary_search(t.online_cpus.begin(), t.online_cpus.end(), cpu))
      offline.push_back(cpu);
  if (!offline.empty())
    c.error("partition.housekeeping_cpus",
            fmt::format("CPU{} {} {} not online on this host (online: {})",
                        offline.size() > 1 ? "s" : "", common::format_cpulist(offline),
                        offline.size() > 1 ? "are" : "is", common::format_cpulist(t.online_cpus)),
            "list online CPUs only");
}

Section partition_section() {
  Keys<Partition> k;
  k.ints("draft_l3", &Partition::draft_l3, 0, 1023)
      .ints("verify_l3", &Partition::verify_l3, 0, 1023)
      .ints("housekeeping_cores", &Partition::housekeeping_cores, 0, 8191)
      .cpulist("housekeeping_cpus", &Partition::housekeeping_cpus)
      .flag("use_smt_siblings", &Partition::use_smt_siblings);
  return section_of("partition", field(&Profile::partition), k, check_partition,
                    check_partition_host);
}

Section engine_section() {
  Keys<EngineDefaults> k;
  k.integer("threads", &EngineDefaults::threads, 0, 8192)
      .integer("draft_len", &EngineDefaults::draft_len, 1, 64)
      .choice("kv_type", &EngineDefaults::kv_type, {"f16", "f32"});
  return section_of("engine", field(&Profile::engine), k);
}

void read_expectations(KeyReader& r, Profile& p) {
  std::vector<std::string> keys = expectation_keys();
  keys.push_back("source");
  keys.push_back("model");
  r.known(keys);
  r.get_text("source", p.expectations_source, kLongText);
  r.get_text("model", p.expectations_model, kShortText);
  for (const auto& k : expectation_keys()) {
    double v = -1;
    r.get(k.c_str(), v, 0, 1e6);
    if (v >= 0) p.expectations[k] = v;
  }
}

void read_identity(KeyReader& top, Profile& p) {
  top.get_identifier("name", p.name);
  if (top.has("aliases")) {
    std::vector<std::string> aliases;
    top.get("aliases", aliases);
    for (const auto& a : aliases)
      if (auto why = identifier_problem(a); !why.empty()) {
        top.error("aliases", fmt::format("aliases: {} {}", shown(a), why),
                  fmt::format("use 1-{} of A-Z a-z 0-9 . _ -", kMaxIdentifier));
        aliases.clear();
        break;
      }
    if (aliases.size() > 16)
      top.error("aliases", "aliases lists more than 16 names", "keep the short ones");
    else
      p.aliases = std::move(aliases);
  }
  top.get_text("description", p.description, kLongText);
}

// A [name] table through `read`; anything else under that name is an error.
template <class Read>
void read_table(const toml::table& root, const std::string& name, ApplyContext& ctx, Read read) {
  const toml::node* n = root.get(name);
  if (!n) return;
  if (auto* t = n->as_table()) {
    TableState state{*t, name, ctx};
    KeyReader r(state);
    read(r);
  } else {
    ctx.diags.push_back(diag_at(n->source(), ctx.file,
                                fmt::format("'{}' must be a table, not {}", name, type_name(*n)),
                                fmt::format("write it as a [{}] section", name)));
  }
}

}  // namespace

Diagnostic diag_at(const toml::source_region& where, const std::string& file, std::string what,
                   std::string fix) {
  return {file, static_cast<int>(where.begin.line), static_cast<int>(where.begin.column),
          std::move(what), std::move(fix)};
}

std::vector<std::string> expectation_keys() {
  std::vector<std::string> keys = {"baseline"};
  for (const auto& st : step_schemas())
    if (st.measured) keys.push_back(st.name);
  keys.push_back("roofline");
  return keys;
}

std::vector<const Section*> sections() {
  static const Section hardware = hardware_section(), partition = partition_section(),
                       engine = engine_section();
  std::vector<const Section*> out{&hardware, &partition};
  for (const auto& st : step_schemas())
    if (st.section) out.push_back(&*st.section);
  out.push_back(&engine);
  return out;
}

void apply_table(const toml::table& root, ApplyContext& ctx) {
  // Without them every step section would be an "unknown key": a program
  // that loads profiles must link the stack's steps (stack/CMakeLists.txt).
  if (step_schemas().empty())
    throw std::logic_error("no steps are registered: link epyctune_stack to load profiles");
  TableState top_state{root, "", ctx};
  KeyReader top(top_state);
  std::vector<std::string> keys = {"include", "name", "aliases", "description"};
  for (const Section* s : sections()) keys.push_back(s->name);
  keys.push_back("expectations");
  top.known(keys);
  if (ctx.outermost) read_identity(top, ctx.profile);
  for (const Section* s : sections())
    read_table(root, s->name, ctx, [&](KeyReader& r) { s->read(r, ctx.profile); });
  read_table(root, "expectations", ctx, [&](KeyReader& r) { read_expectations(r, ctx.profile); });
}

}  // namespace epyctune::profile::detail

namespace epyctune::profile {

namespace {
std::vector<StepSchema>& schemas() {
  static std::vector<StepSchema> all;
  return all;
}
}  // namespace

void register_step_schema(StepSchema s) {
  static const std::vector<std::string> profile_wide = {"include",     "name",        "aliases",
                                                        "description", "hardware",    "partition",
                                                        "engine",      "expectations"};
  auto& all = schemas();
  std::string table = s.section ? s.section->name : "";
  bool clash = std::find(profile_wide.begin(), profile_wide.end(), table) != profile_wide.end();
  for (const auto& x : all)
    clash |= x.number == s.number || x.name == s.name ||
             (s.section && x.section && x.section->name == table);
  if (s.number < 1 || s.name.empty() || clash)
    throw std::logic_error(
        fmt::format("step {} '{}' cannot register: its number, name or section is taken or invalid",
                    s.number, s.name));
  auto at = std::find_if(all.begin(), all.end(),
                         [&](const StepSchema& x) { return x.number > s.number; });
  all.insert(at, std::move(s));
}

const std::vector<StepSchema>& step_schemas() {
  return schemas();
}

}  // namespace epyctune::profile
