#include "profile/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "profile/generate_sections.hpp"
#include "profile/loader.hpp"
#include "profile/resolve.hpp"
#include "profile/schema.hpp"
#include "profile/section.hpp"

namespace epyctune::profile {

namespace {

using detail::GenHost;
using detail::TomlOut;

int cores_of_socket(const host::Topology& t, int s) {
  return static_cast<int>(std::count_if(t.cores.begin(), t.cores.end(),
                                        [&](const host::Core& c) { return c.socket == s; }));
}

// One core per 64 on each socket (rounded up), the socket's first: CPU 0
// keeps the boot CPU's timekeeping, and each socket's movable IRQs stay on
// their own socket. The 9754 built-in keeps 2 of 128 for the same reason.
std::vector<int> housekeeping_cores(const host::Topology& t) {
  std::vector<int> out;
  for (int s = 0; s < t.sockets; ++s) {
    int want = (cores_of_socket(t, s) + 63) / 64, taken = 0;
    for (const auto& c : t.cores)
      if (c.socket == s && taken < want) {
        out.push_back(c.id);
        ++taken;
      }
  }
  return out;
}

int free_cores(const host::Topology& t, const std::vector<int>& domains,
               const std::vector<int>& hk) {
  int n = 0;
  for (int d : domains)
    for (int core : t.l3_domains[static_cast<size_t>(d)].cores)
      n += std::find(hk.begin(), hk.end(), core) == hk.end();
  return n;
}

// The draft streams all of its weights for every token it proposes: it runs
// from cache only when they fit in the L3 of its domains. The smallest set of
// whole CCDs on socket 0 that holds them, up to a quarter of the socket (more
// would starve the bandwidth-bound target); a draft that fits nowhere gets one
// CCD: its own cores and its own link to memory.
void choose_draft(GenHost& h) {
  const int g = h.l3_per_ccd;
  const int n0 = static_cast<int>(h.socket0_domains.size());
  const int cap = std::max(g, n0 / 4 / g * g);
  int fit = h.l3_bytes ? static_cast<int>((h.draft_bytes + h.l3_bytes - 1) / h.l3_bytes) : 0;
  fit = (fit + g - 1) / g * g;
  std::string size = detail::model_what(h.opt.draft, kDefaultDraftBytes, "1B Q4_0 draft");
  int n = g;
  if (fit > 0 && fit <= cap) {
    n = fit;
    h.draft_why = fmt::format("{} fits in the L3 of {} domain(s) of {} MiB: it runs from cache",
                              size, n, h.l3_bytes >> 20);
  } else {
    h.draft_why = fmt::format(
        "{} needs {} L3 domain(s) of {} MiB to run from cache, more than a quarter of socket 0 "
        "({}): it streams from memory on {} {}, with its own cores and link",
        size, fit, h.l3_bytes >> 20, cap, g == 1 ? "one" : "the two domains of one",
        h.gen.ccd_word);
  }
  // Housekeeping comes out of the first domains; the draft keeps at least one core.
  auto first = [&](int k) {
    return std::vector<int>(h.socket0_domains.begin(), h.socket0_domains.begin() + k);
  };
  while (free_cores(h.t, first(n), h.housekeeping) < 1 && n + g < n0) n += g;
  if (n >= static_cast<int>(h.t.l3_domains.size()))
    throw GenerateError(fmt::format(
        "this host has {} L3 domain(s) and the draft needs {}: nothing is left for the target; "
        "split draft and verify by hand, or run without a separate draft partition",
        h.t.l3_domains.size(), n));
  h.draft = first(n);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

GenHost make_host(const host::Topology& t, const HostFacts& facts, const GenerateOptions& opt) {
  if (t.cpu.vendor != "AuthenticAMD")
    throw GenerateError(
        fmt::format("the CPU vendor is {}: epyctune generates profiles for AMD EPYC hosts only",
                    t.cpu.vendor.empty() ? "unknown" : detail::clean(t.cpu.vendor, 40)));
  if (t.sockets < 1 || t.n_cores() == 0 || t.l3_domains.empty())
    throw GenerateError("the topology has no cores: nothing to generate a profile for");
  if (std::any_of(t.l3_domains.begin(), t.l3_domains.end(),
                  [](const host::L3Domain& d) { return d.synthetic || d.size_bytes == 0; }))
    throw GenerateError(
        "the host reports no L3 cache (virtual machines often hide it): the partition is made of "
        "L3 domains; run on the host itself, or export its topology there (lstopo --of xml)");
  if (t.nodes_per_socket() > 4)
    throw GenerateError(fmt::format(
        "this host runs {} NUMA nodes per socket, more than any NPS mode: firmware's \"ACPI SRAT "
        "L3 Cache As NUMA Domain\" is on; turn it off in BIOS setup (AMD CBS > DF Common "
        "Options), or write [bios] of the profile by hand",
        t.nodes_per_socket()));
  if (t.l3_domains.size() < 2)
    throw GenerateError(
        "the host has a single L3 domain: there is no second domain to give the draft; run "
        "without a separate draft partition");
  GenHost h{t, facts, opt, detail::generation_of(t.cpu.microarch), {}, 1, 0, 0, 0, {}, {}, {}};
  for (const auto& d : t.l3_domains)
    if (d.socket == 0) h.socket0_domains.push_back(d.index);
  int l3ps = static_cast<int>(t.l3_domains.size()) / t.sockets;
  h.l3_per_ccd = l3ps % h.gen.l3_per_ccd == 0 &&
                         static_cast<int>(h.socket0_domains.size()) % h.gen.l3_per_ccd == 0
                     ? h.gen.l3_per_ccd
                     : 1;
  h.l3_bytes = t.l3_domains.front().size_bytes;
  h.target_bytes = opt.target.bytes ? opt.target.bytes : kDefaultTargetBytes;
  h.draft_bytes = opt.draft.bytes ? opt.draft.bytes : kDefaultDraftBytes;
  h.housekeeping = housekeeping_cores(t);
  choose_draft(h);
  return h;
}

}  // namespace

std::string generated_name(const host::Topology& t) {
  std::string part = lower(detail::part_number(t.cpu.brand));
  std::string base =
      part.empty() ? fmt::format("amd-{}-{}c", t.cpu.microarch, t.n_cores()) : "epyc-" + part;
  if (t.sockets > 1) base += fmt::format("-{}s", t.sockets);
  return base + "-generated";
}

namespace {

// Sections no host fact decides, written with the values a load gives them
// (a step added in its own file has one), so the file still states every key.
// Values TOML cannot take from JSON as they are (tables, null) stay implicit.
void default_sections(detail::TomlOut& o, const Profile& so_far) {
  for (const Section* s : detail::sections()) {
    if (o.str().find("\n[" + s->name + "]\n") != std::string::npos) continue;
    o.section(s->name);
    o.comment("No host fact decides these: the values every profile gets.");
    for (const auto& k : s->keys) {
      if (k.as == ShowAs::Hidden) continue;
      nlohmann::json v = k.show(so_far);
      bool scalars = !v.is_array() || std::all_of(v.begin(), v.end(), [](const auto& e) {
        return e.is_primitive() && !e.is_null();
      });
      if (v.is_null() || v.is_object() || !scalars) continue;
      o.kv(k.name, v.dump(), "");
    }
  }
}

}  // namespace

GeneratedProfile generate_profile(const host::Topology& t, const HostFacts& facts,
                                  const GenerateOptions& opt) {
  if (auto why = detail::identifier_problem(opt.name); !opt.name.empty() && !why.empty())
    throw GenerateError(
        fmt::format("--name {}: {}", detail::toml_string(detail::clean(opt.name, 80)), why));
  GenHost h = make_host(t, facts, opt);
  std::string name = opt.name.empty() ? generated_name(t) : opt.name;
  TomlOut o;
  o.comment(fmt::format("Generated by `epyctune profile generate{}` from {}.",
                        opt.host_args.empty() ? "" : " " + detail::clean(opt.host_args, 400),
                        detail::clean(t.source, 200)));
  o.comment("Self-contained: every key is stated with its reason, nothing is inherited.");
  o.comment("Check it with `epyctune plan --profile FILE`; profiles/README.md explains the keys.");
  o.kv("name", detail::toml_string(name), "");
  o.kv("description",
       detail::toml_string(
           fmt::format("{} x {} ({}), {} L3 domains of {} MiB per socket, generated", t.sockets,
                       detail::clean(t.cpu.brand.empty() ? "AMD CPU" : t.cpu.brand, 64), h.gen.name,
                       t.l3_domains.size() / static_cast<size_t>(t.sockets), h.l3_bytes >> 20)),
       "");
  detail::hardware_section(o, h);
  detail::partition_section(o, h);
  detail::bios_section(o, h);
  detail::numa_section(o, h);
  detail::isolation_section(o);
  detail::cat_section(o, h);
  // The cpufreq comments name the resolved CPUs: resolve what is written so far.
  HostPartition part;
  try {
    part = resolve_partition(load_profile_text(o.str(), name + ".toml"), t);
  } catch (const ProfileError& e) {
    throw GenerateError(fmt::format("the generated partition does not resolve: {}", e.what()));
  }
  detail::cpufreq_section(o, h, part);
  detail::prefetch_section(o, h);
  detail::engine_sections(o);
  try {
    default_sections(o, load_profile_text(o.str(), name + ".toml"));
  } catch (const ProfileError& e) {
    throw GenerateError(fmt::format("the generated profile does not load: {}", e.what()));
  }
  detail::expectations_section(o, h);

  GeneratedProfile g;
  g.text = o.str();
  try {
    g.profile = load_profile_text(g.text, name + ".toml");
    validate_profile(g.profile, &t);
    if (facts.l3cat) validate_host(g.profile, {nullptr, &*facts.l3cat});
    g.partition = resolve_partition(g.profile, t);
  } catch (const ProfileError& e) {
    throw GenerateError(fmt::format("the generated profile does not validate: {}", e.what()));
  }
  return g;
}

namespace {

std::string shell_word(const std::string& s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./-=:,+@%").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string generate_command(const host::Topology& t, const std::string& sysroot,
                             const std::string& topology_xml) {
  std::string file = generated_name(t) + ".toml";
  if (!topology_xml.empty())
    return fmt::format("epyctune profile generate --topology {} -o {}", shell_word(topology_xml),
                       file);
  std::string dir = std::string(kProfileOverrideDir) + "/" + file;
  if (sysroot.empty() || sysroot == "/") return fmt::format("epyctune profile generate -o {}", dir);
  std::string root = sysroot.back() == '/' ? sysroot.substr(0, sysroot.size() - 1) : sysroot;
  return fmt::format("epyctune profile generate --sysroot {} -o {}", shell_word(root),
                     shell_word(root + dir));
}

std::string generated_plan_command(const host::Topology& t, const std::string& sysroot,
                                   const std::string& topology_xml) {
  std::string name = generated_name(t);
  if (!topology_xml.empty())
    return fmt::format("epyctune plan --topology {} --profile ./{}.toml", shell_word(topology_xml),
                       name);
  if (sysroot.empty() || sysroot == "/") return "epyctune plan --profile " + name;
  std::string root = sysroot.back() == '/' ? sysroot.substr(0, sysroot.size() - 1) : sysroot;
  return fmt::format("epyctune plan --sysroot {} --profile {}", shell_word(root), name);
}

}  // namespace epyctune::profile
