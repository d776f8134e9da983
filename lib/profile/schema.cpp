// The profile schema: which keys exist in which table, their types and ranges.
// profiles/README.md documents the same schema for people.
#include "profile/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "common/cpulist.hpp"

namespace epyctune::profile::detail {

namespace {

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// A value as messages quote it: control characters escaped, a hostile
// megabyte cut to its start.
std::string shown(std::string_view v, char quote = '"') {
  constexpr size_t kMax = 40;
  std::string out(1, quote);
  for (size_t i = 0; i < v.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(v[i]);
    if (c == static_cast<unsigned char>(quote) || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + quote + (v.size() > kMax ? "..." : "");
}

// Reads one TOML table of the schema, recording origins and diagnostics.
class Reader {
 public:
  Reader(const toml::table& t, std::string section, ApplyContext& ctx)
      : t_(t), section_(std::move(section)), ctx_(ctx) {}

  // Rejects keys not in `known`, suggesting the closest one.
  void known(const std::vector<std::string>& keys) {
    for (const auto& [k, node] : t_) {
      std::string key(k.str());
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string where = section_.empty() ? "at the top level" : fmt::format("in [{}]", section_);
      std::string near = closest(key, keys);
      std::string fix = near.empty() ? fmt::format("valid keys: {}", join(keys))
                                     : fmt::format("did you mean '{}'?", near);
      error(k.source(), fmt::format("unknown key {} {}", shown(key, '\''), where), fix);
    }
  }

  const toml::node* node(const char* key) {
    const toml::node* n = t_.get(key);
    if (n) ctx_.profile.origins[dotted(key)] = origin(n->source());
    return n;
  }

  void get(const char* key, bool& out) {
    if (auto* n = node(key)) {
      if (auto v = n->value_exact<bool>())
        out = *v;
      else
        type_error(*n, key, "a boolean", "true or false");
    }
  }

  template <typename Int>
  void get_int(const char* key, Int& out, int64_t lo, int64_t hi) {
    if (auto* n = node(key)) {
      auto v = n->value_exact<int64_t>();
      if (!v) return type_error(*n, key, "an integer", fmt::format("{}", lo));
      if (*v < lo || *v > hi) return range_error(*n, key, fmt::format("{}", *v), lo, hi);
      out = static_cast<Int>(*v);
    }
  }

  void get(const char* key, double& out, double lo, double hi) {
    if (auto* n = node(key)) {
      std::optional<double> v;
      if (auto i = n->value_exact<int64_t>())
        v = static_cast<double>(*i);
      else if (auto d = n->value_exact<double>())
        v = *d;
      if (!v) return type_error(*n, key, "a number", fmt::format("{}", lo));
      if (!(*v >= lo && *v <= hi) || std::isnan(*v))
        return error(n->source(), fmt::format("{} = {} is out of range", dotted(key), *v),
                     fmt::format("use a value from {} to {}", lo, hi));
      out = *v;
    }
  }

  void get(const char* key, std::string& out, const std::vector<std::string>& allowed = {}) {
    if (auto* n = node(key)) {
      auto v = n->value_exact<std::string>();
      if (!v)
        return type_error(*n, key, "a string",
                          allowed.empty() ? "\"...\"" : fmt::format("\"{}\"", allowed.front()));
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) {
        std::string near = closest(*v, allowed);
        return error(
            n->source(), fmt::format("{} = {} is not a valid value", dotted(key), shown(*v)),
            near.empty() ? fmt::format("use one of: {}", join(allowed))
                         : fmt::format("did you mean \"{}\"? (one of: {})", near, join(allowed)));
      }
      out = *v;
    }
  }

  // A name that ends up in a file name, a resctrl group or a boot loader
  // comment: identifier_problem() says what is allowed.
  void get_identifier(const char* key, std::string& out) {
    auto* n = node(key);
    if (!n) return;
    auto v = n->value_exact<std::string>();
    if (!v) return type_error(*n, key, "a string", "\"epyc-9754\"");
    if (auto why = identifier_problem(*v); !why.empty())
      return error(n->source(), fmt::format("{} = {} {}", dotted(key), shown(*v), why),
                   fmt::format("use 1-{} of A-Z a-z 0-9 . _ -, starting with a letter or digit",
                               kMaxIdentifier));
    out = *v;
  }

  // Free text shown to people (descriptions, notes, citations): one line,
  // no control characters, at most max_len bytes.
  void get_text(const char* key, std::string& out, size_t max_len) {
    auto* n = node(key);
    if (!n) return;
    auto v = n->value_exact<std::string>();
    if (!v) return type_error(*n, key, "a string", "\"...\"");
    if (text_problem(*n, key, *v, max_len)) return;
    out = *v;
  }

  void get_texts(const char* key, std::vector<std::string>& out, size_t max_items, size_t max_len) {
    std::vector<std::string> v;
    if (!node(key)) return;
    get(key, v);
    if (v.size() > max_items)
      return error(node(key)->source(),
                   fmt::format("{} has {} entries, more than {}", dotted(key), v.size(), max_items),
                   "shorten the list");
    for (const auto& s : v)
      if (text_problem(*node(key), key, s, max_len)) return;
    out = std::move(v);
  }

  // An absolute path epyctune writes to: components are identifiers, no "."
  // or "..", at most kMaxPath bytes. `dir` and `ext`, when given, pin the
  // directory and the extension.
  void get_path(const char* key, std::string& out, std::string_view dir, std::string_view ext,
                std::string example) {
    auto* n = node(key);
    if (!n) return;
    auto v = n->value_exact<std::string>();
    if (!v) return type_error(*n, key, "a path string", "\"" + example + "\"");
    std::string why = path_problem(*v, dir, ext);
    if (!why.empty())
      return error(n->source(), fmt::format("{} = {} {}", dotted(key), shown(*v), why),
                   fmt::format("e.g. {} = \"{}\"", key, example));
    out = *v;
  }

  bool text_problem(const toml::node& n, std::string_view key, const std::string& v,
                    size_t max_len) {
    if (v.size() > max_len) {
      error(n.source(),
            fmt::format("{} is {} bytes long, more than {}", dotted(key), v.size(), max_len),
            "shorten it");
      return true;
    }
    for (char ch : v) {
      auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c == 0x7f) {
        error(n.source(),
              fmt::format("{} = {} contains a control character", dotted(key), shown(v)),
              "write it on one line without tabs or escapes such as \\n");
        return true;
      }
    }
    return false;
  }

  void get(const char* key, std::vector<std::string>& out) {
    if (auto* n = node(key)) {
      auto* arr = n->as_array();
      if (!arr) return type_error(*n, key, "an array of strings", "[\"...\"]");
      std::vector<std::string> v;
      for (const auto& e : *arr) {
        auto s = e.value_exact<std::string>();
        if (!s) return type_error(e, key, "an array of strings", "[\"...\"]");
        v.push_back(*s);
      }
      out = std::move(v);
    }
  }

  void get(const char* key, std::vector<int>& out, int64_t lo, int64_t hi) {
    if (auto* n = node(key)) {
      auto* arr = n->as_array();
      if (!arr) return type_error(*n, key, "an array of integers", "[0, 1]");
      std::vector<int> v;
      for (const auto& e : *arr) {
        auto i = e.value_exact<int64_t>();
        if (!i) return type_error(e, key, "an array of integers", "[0, 1]");
        if (*i < lo || *i > hi) return range_error(e, key, fmt::format("{}", *i), lo, hi);
        v.push_back(static_cast<int>(*i));
      }
      out = std::move(v);
    }
  }

  // A kernel CPU list string ("0-1,128-129").
  void get_cpulist(const char* key, std::vector<int>& out) {
    if (auto* n = node(key)) {
      auto s = n->value_exact<std::string>();
      if (!s) return type_error(*n, key, "a CPU list string", "\"0-1,128-129\"");
      try {
        out = common::parse_cpulist(*s);
      } catch (const std::invalid_argument& e) {
        error(n->source(), fmt::format("{}: {}", dotted(key), e.what()),
              "write CPU numbers and ranges separated by commas, e.g. \"0-1,128-129\"");
      }
    }
  }

  // "all" or a hex way mask ("fff0", "0xfff0").
  void get_cbm(const char* key, std::string& out) {
    if (auto* n = node(key)) {
      auto s = n->value_exact<std::string>();
      if (!s) return type_error(*n, key, "a hex mask string or \"all\"", "\"fff0\"");
      std::string hex = *s;
      if (hex != "all") {
        if (hex.rfind("0x", 0) == 0 || hex.rfind("0X", 0) == 0) hex = hex.substr(2);
        bool ok = !hex.empty() && hex.size() <= 16 &&
                  std::all_of(hex.begin(), hex.end(),
                              [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
        if (!ok || std::stoull(hex, nullptr, 16) == 0)
          return error(n->source(),
                       fmt::format("{} = \"{}\" is not a cache way mask", dotted(key), *s),
                       "write a non-zero hex mask such as \"fff0\", or \"all\"");
        std::transform(hex.begin(), hex.end(), hex.begin(),
                       [](char c) { return static_cast<char>(std::tolower(c)); });
      }
      out = hex;
    }
  }

  // "max" | "min" | a frequency in kHz.
  void get_freq(const char* key, std::string& out) {
    if (auto* n = node(key)) {
      if (auto i = n->value_exact<int64_t>()) {
        if (*i < 400000 || *i > 10000000)
          return error(n->source(),
                       fmt::format("{} = {} is not a plausible frequency in kHz", dotted(key), *i),
                       "give kHz (e.g. 2250000 for 2.25 GHz), or \"max\" / \"min\"");
        out = std::to_string(*i);
      } else if (auto s = n->value_exact<std::string>(); s && (*s == "max" || *s == "min")) {
        out = *s;
      } else {
        error(n->source(),
              fmt::format("{} must be \"max\", \"min\" or a frequency in kHz", dotted(key)),
              "e.g. verify_freq = 2250000");
      }
    }
  }

  const toml::table* table(const char* key) {
    const toml::node* n = t_.get(key);
    if (!n) return nullptr;
    if (auto* t = n->as_table()) return t;
    type_error(*n, key, "a table", fmt::format("[{}]", key));
    return nullptr;
  }

  std::string dotted(std::string_view key) const {
    return section_.empty() ? std::string(key) : section_ + "." + std::string(key);
  }
  Origin origin(const toml::source_region& r) const {
    return {ctx_.file, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
  }
  void error(const toml::source_region& r, std::string what, std::string fix) {
    ctx_.diags.push_back(diag_at(r, ctx_.file, std::move(what), std::move(fix)));
  }
  void type_error(const toml::node& n, std::string_view key, const char* expected,
                  std::string example) {
    error(n.source(), fmt::format("{} must be {}, not {}", dotted(key), expected, type_name(n)),
          fmt::format("e.g. {} = {}", key, example));
  }
  void range_error(const toml::node& n, std::string_view key, std::string value, int64_t lo,
                   int64_t hi) {
    error(n.source(), fmt::format("{} = {} is out of range", dotted(key), value),
          fmt::format("use a value from {} to {}", lo, hi));
  }
  const toml::table& raw() const { return t_; }

 private:
  const toml::table& t_;
  std::string section_;
  ApplyContext& ctx_;
};

constexpr size_t kShortText = 128;  // codename, memory type, a citation's model
constexpr size_t kLongText = 1024;  // a description, a note, a citation

void read_hardware(Reader& r, Hardware& h) {
  r.known({"vendor", "family", "models", "codename", "brand_contains", "sockets",
           "cores_per_socket", "l3_domains_per_socket", "ccds_per_socket", "cores_per_l3", "l3_mib",
           "memory_channels", "memory_type", "memory_bandwidth_gbs", "nps_supported", "notes"});
  r.get("vendor", h.vendor, {"AuthenticAMD", "GenuineIntel"});
  r.get_int("family", h.family, 0, 255);
  r.get("models", h.models, 0, 255);
  r.get_text("codename", h.codename, kShortText);
  r.get_text("brand_contains", h.brand_contains, kShortText);
  r.get_int("sockets", h.sockets, 1, 8);
  r.get_int("cores_per_socket", h.cores_per_socket, 0, 1024);
  r.get_int("l3_domains_per_socket", h.l3_domains_per_socket, 0, 256);
  r.get_int("ccds_per_socket", h.ccds_per_socket, 0, 64);
  r.get_int("cores_per_l3", h.cores_per_l3, 0, 256);
  int64_t mib = -1;
  r.get_int("l3_mib", mib, 0, 4096);
  if (mib >= 0) h.l3_bytes = static_cast<uint64_t>(mib) << 20;
  r.get_int("memory_channels", h.memory_channels, 0, 64);
  r.get_text("memory_type", h.memory_type, kShortText);
  r.get("memory_bandwidth_gbs", h.memory_bandwidth_gbs, 0, 10000);
  r.get("nps_supported", h.nps_supported, 0, 4);
  r.get_texts("notes", h.notes, 64, kLongText);
}

void read_partition(Reader& r, Partition& p) {
  r.known({"draft_l3", "verify_l3", "housekeeping_cores", "housekeeping_cpus", "use_smt_siblings"});
  r.get("draft_l3", p.draft_l3, 0, 1023);
  r.get("verify_l3", p.verify_l3, 0, 1023);
  r.get("housekeeping_cores", p.housekeeping_cores, 0, 8191);
  r.get_cpulist("housekeeping_cpus", p.housekeeping_cpus);
  r.get("use_smt_siblings", p.use_smt_siblings);
}

void read_steps(const toml::table& root, ApplyContext& ctx) {
  Profile& p = ctx.profile;
  auto section = [&](const char* name, auto&& fn) {
    const toml::node* n = root.get(name);
    if (!n) return;
    if (auto* t = n->as_table()) {
      Reader r(*t, name, ctx);
      fn(r);
    } else {
      ctx.diags.push_back(diag_at(n->source(), ctx.file,
                                  fmt::format("'{}' must be a table, not {}", name, type_name(*n)),
                                  fmt::format("write it as a [{}] section", name)));
    }
  };
  section("hardware", [&](Reader& r) { read_hardware(r, p.hardware); });
  section("partition", [&](Reader& r) { read_partition(r, p.partition); });
  section("bios", [&](Reader& r) {
    r.known({"expect_nps", "smt", "determinism", "boost"});
    r.get_int("expect_nps", p.bios.expect_nps, 0, 4);
    r.get("smt", p.bios.smt, {"on", "off", "keep"});
    r.get("determinism", p.bios.determinism, {"performance", "power", "any"});
    r.get("boost", p.bios.boost, {"on", "off", "keep"});
  });
  section("numa", [&](Reader& r) {
    r.known({"numa_balancing", "thp", "hugepages_2m_per_node", "hugepages_1g_per_node", "model_gb",
             "hugepage_headroom"});
    r.get("numa_balancing", p.numa.numa_balancing);
    r.get("thp", p.numa.thp, {"always", "madvise", "never", "keep"});
    if (auto* n = r.raw().get("hugepages_2m_per_node"); n && n->value_exact<std::string>()) {
      r.node("hugepages_2m_per_node");
      if (*n->value_exact<std::string>() == "auto")
        p.numa.hugepages_2m_per_node = -1;
      else
        r.error(n->source(), "numa.hugepages_2m_per_node must be \"auto\" or a page count",
                "e.g. hugepages_2m_per_node = 2048 (4 GiB per node)");
    } else {
      r.get_int("hugepages_2m_per_node", p.numa.hugepages_2m_per_node, 0, int64_t{1} << 30);
    }
    r.get_int("hugepages_1g_per_node", p.numa.hugepages_1g_per_node, 0, 1 << 20);
    r.get("model_gb", p.numa.model_gb, 0, 4096);
    r.get("hugepage_headroom", p.numa.hugepage_headroom, 1.0, 4.0);
  });
  section("isolation", [&](Reader& r) {
    r.known({"isolate", "nohz_full", "rcu_nocbs", "irq_affinity", "bootloader_dropin"});
    r.get("isolate", p.isolation.isolate);
    r.get("nohz_full", p.isolation.nohz_full);
    r.get("rcu_nocbs", p.isolation.rcu_nocbs);
    r.get("irq_affinity", p.isolation.irq_affinity);
    // GRUB sources /etc/default/grub.d/*.cfg: any other path would be a file
    // root writes for nothing, or one it must never write.
    r.get_path("bootloader_dropin", p.isolation.bootloader_dropin, "/etc/default/grub.d", ".cfg",
               "/etc/default/grub.d/epyctune.cfg");
  });
  section("cat", [&](Reader& r) {
    r.known({"enabled", "draft_group", "verify_group", "draft_cbm", "verify_cbm", "default_cbm"});
    r.get("enabled", p.cat.enabled);
    r.get_identifier("draft_group", p.cat.draft_group);
    r.get_identifier("verify_group", p.cat.verify_group);
    r.get_cbm("draft_cbm", p.cat.draft_cbm);
    r.get_cbm("verify_cbm", p.cat.verify_cbm);
    r.get_cbm("default_cbm", p.cat.default_cbm);
  });
  section("cpufreq", [&](Reader& r) {
    r.known({"governor", "draft_freq", "verify_freq", "epp"});
    r.get("governor", p.cpufreq.governor,
          {"performance", "powersave", "userspace", "schedutil", "ondemand", "conservative"});
    r.get_freq("draft_freq", p.cpufreq.draft_freq);
    r.get_freq("verify_freq", p.cpufreq.verify_freq);
    r.get("epp", p.cpufreq.epp,
          {"default", "performance", "balance_performance", "balance_power", "power", "keep"});
  });
  section("prefetch", [&](Reader& r) {
    r.known({"enabled", "msr", "mask", "value", "cpus", "extra"});
    r.get("enabled", p.prefetch.enabled);
    r.get_int("msr", p.prefetch.msr, 0, 0xFFFFFFFFll);
    r.get_int("mask", p.prefetch.mask, 0, std::numeric_limits<int64_t>::max());
    r.get_int("value", p.prefetch.value, 0, std::numeric_limits<int64_t>::max());
    r.get("cpus", p.prefetch.cpus, {"inference", "all"});
    if (auto* n = r.node("extra")) {
      auto* arr = n->as_array();
      if (!arr || !arr->is_array_of_tables()) {
        r.type_error(*n, "extra", "an array of tables", "[[prefetch.extra]] address = 0x... ");
        return;
      }
      p.prefetch.extra.clear();
      for (const auto& e : *arr) {
        Reader x(*e.as_table(), "prefetch.extra", ctx);
        x.known({"address", "mask", "value", "reason"});
        ExtraMsr m;
        x.get_int("address", m.address, 0, 0xFFFFFFFFll);
        x.get_int("mask", m.mask, 0, std::numeric_limits<int64_t>::max());
        x.get_int("value", m.value, 0, std::numeric_limits<int64_t>::max());
        x.get_text("reason", m.reason, kLongText);
        if (!x.raw().get("address") || m.reason.empty())
          x.error(e.source(), "[[prefetch.extra]] needs an address and a reason",
                  "say which MSR and why the operator allows writing it");
        p.prefetch.extra.push_back(m);
      }
    }
  });
  section("weights", [&](Reader& r) {
    r.known({"layout", "hugepages", "launch_config"});
    r.get("layout", p.weights.layout, {"interleave", "split", "local"});
    r.get("hugepages", p.weights.hugepages);
    r.get_path("launch_config", p.weights.launch_config, "", ".toml",
               "/var/lib/epyctune/engine.toml");
  });
  section("spec", [&](Reader& r) {
    r.known({"draft_source", "draft_len", "draft_threads", "verify_threads", "launch_config"});
    r.get("draft_source", p.spec.draft_source, {"model", "lookup", "cascade"});
    r.get_int("draft_len", p.spec.draft_len, 1, 64);
    r.get_int("draft_threads", p.spec.draft_threads, 0, 8192);
    r.get_int("verify_threads", p.spec.verify_threads, 0, 8192);
    r.get_path("launch_config", p.spec.launch_config, "", ".toml", "/var/lib/epyctune/engine.toml");
  });
  section("engine", [&](Reader& r) {
    r.known({"threads", "draft_len", "kv_type"});
    r.get_int("threads", p.engine.threads, 0, 8192);
    r.get_int("draft_len", p.engine.draft_len, 1, 64);
    r.get("kv_type", p.engine.kv_type, {"f16", "f32"});
  });
  section("expectations", [&](Reader& r) {
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
  });
}

}  // namespace

Diagnostic diag_at(const toml::source_region& where, const std::string& file, std::string what,
                   std::string fix) {
  return {file, static_cast<int>(where.begin.line), static_cast<int>(where.begin.column),
          std::move(what), std::move(fix)};
}

const std::vector<std::string>& expectation_keys() {
  static const std::vector<std::string> keys = {"baseline", "bios",    "numa",     "isolation",
                                                "cat",      "cpufreq", "prefetch", "weights",
                                                "spec",     "roofline"};
  return keys;
}

void apply_table(const toml::table& root, ApplyContext& ctx) {
  Reader top(root, "", ctx);
  top.known({"include", "name", "aliases", "description", "hardware", "partition", "bios", "numa",
             "isolation", "cat", "cpufreq", "prefetch", "weights", "spec", "engine",
             "expectations"});
  if (ctx.outermost) {
    top.get_identifier("name", ctx.profile.name);
    if (auto* n = top.node("aliases")) {
      std::vector<std::string> aliases;
      top.get("aliases", aliases);
      for (const auto& a : aliases)
        if (auto why = identifier_problem(a); !why.empty()) {
          top.error(n->source(), fmt::format("aliases: {} {}", shown(a), why),
                    fmt::format("use 1-{} of A-Z a-z 0-9 . _ -", kMaxIdentifier));
          aliases.clear();
          break;
        }
      if (aliases.size() > 16)
        top.error(n->source(), "aliases lists more than 16 names", "keep the short ones");
      else
        ctx.profile.aliases = std::move(aliases);
    }
    top.get_text("description", ctx.profile.description, kLongText);
  }
  read_steps(root, ctx);
}

}  // namespace epyctune::profile::detail
