#include "launch/launch_config.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/cpulist.hpp"

namespace epyctune::launch {

namespace {

toml::array int_array(const std::vector<int>& v) {
  toml::array a;
  for (int x : v) a.push_back(x);
  return a;
}

// "[name]\n# comment\n" followed by the keys of `t` as toml++ formats them.
std::string section(const std::string& name, const std::string& comment, const toml::table& t) {
  std::ostringstream os;
  os << "[" << name << "]\n# " << comment << "\n" << t << "\n\n";
  return os.str();
}

void put_side(toml::table& t, const Side& s) {
  const std::string prefix = role_name(s.role);
  t.insert(prefix + "_l3", int_array(s.l3));
  t.insert(prefix + "_cpus", common::format_cpulist(s.cpus));
  t.insert(prefix + "_nodes", int_array(s.nodes));
  t.insert(prefix + "_threads", side_threads(s));
  if (!s.group.empty()) t.insert(prefix + "_resctrl_group", s.group);
}

// Reads one section's keys, rejecting anything it does not know: a typo in a
// hand-edited launch config must not silently fall back to a default.
class SectionReader {
 public:
  SectionReader(const toml::table& t, std::string source, std::string name)
      : t_(t), source_(std::move(source)), name_(std::move(name)) {}

  [[noreturn]] void fail(const toml::node* n, const std::string& what) const {
    int line = n ? static_cast<int>(n->source().begin.line) : 0;
    throw LaunchConfigError(line > 0 ? fmt::format("{}:{}: [{}] {}", source_, line, name_, what)
                                     : fmt::format("{}: [{}] {}", source_, name_, what));
  }
  const toml::node* get(const std::string& key, bool required) {
    seen_.insert(key);
    const toml::node* n = t_.get(key);
    if (!n && required)
      fail(nullptr, fmt::format("missing key '{}': regenerate the file with `epyctune apply` "
                                "(steps weights/spec) or see docs/launch-config.md",
                                key));
    return n;
  }
  std::string str(const std::string& key, const std::string& def, bool required = false) {
    const toml::node* n = get(key, required);
    if (!n) return def;
    auto v = n->value<std::string>();
    if (!v) fail(n, fmt::format("'{}' must be a string", key));
    return *v;
  }
  int integer(const std::string& key, int def, bool required = false) {
    const toml::node* n = get(key, required);
    if (!n) return def;
    auto v = n->value<int64_t>();
    if (!v || !n->is_integer()) fail(n, fmt::format("'{}' must be an integer", key));
    if (*v < 0 || *v > 1'000'000) fail(n, fmt::format("'{}' = {} is out of range", key, *v));
    return static_cast<int>(*v);
  }
  bool boolean(const std::string& key, bool def) {
    const toml::node* n = get(key, false);
    if (!n) return def;
    if (!n->is_boolean()) fail(n, fmt::format("'{}' must be true or false", key));
    return *n->value<bool>();
  }
  std::vector<int> ints(const std::string& key, bool required = false) {
    const toml::node* n = get(key, required);
    if (!n) return {};
    const toml::array* a = n->as_array();
    if (!a) fail(n, fmt::format("'{}' must be an array of integers, e.g. [0, 1]", key));
    std::vector<int> out;
    for (const auto& e : *a) {
      auto v = e.value<int64_t>();
      if (!v || !e.is_integer() || *v < 0)
        fail(n, fmt::format("'{}' must hold non-negative integers", key));
      out.push_back(static_cast<int>(*v));
    }
    return out;
  }
  std::vector<int> cpulist(const std::string& key, bool required = false) {
    const toml::node* n = get(key, required);
    if (!n) return {};
    auto v = n->value<std::string>();
    if (!v) fail(n, fmt::format("'{}' must be a CPU list string such as \"2-15\"", key));
    try {
      return common::parse_cpulist(*v);
    } catch (const std::invalid_argument& e) {
      fail(n, fmt::format("'{}': {}", key, e.what()));
    }
  }
  void no_unknown_keys() const {
    for (const auto& [k, v] : t_)
      if (!seen_.count(std::string(k.str())))
        fail(&v,
             fmt::format("unknown key '{}' (keys are listed in docs/launch-config.md)", k.str()));
  }

 private:
  const toml::table& t_;
  std::string source_, name_;
  std::set<std::string> seen_;
};

Side read_side(SectionReader& r, Role role) {
  const std::string prefix = role_name(role);
  Side s{role};
  s.l3 = r.ints(prefix + "_l3");
  s.cpus = r.cpulist(prefix + "_cpus", true);
  s.nodes = r.ints(prefix + "_nodes");
  s.threads = r.integer(prefix + "_threads", 0);
  s.group = r.str(prefix + "_resctrl_group", "");
  if (s.cpus.empty()) r.fail(nullptr, fmt::format("'{}_cpus' is empty", prefix));
  if (s.threads > static_cast<int>(s.cpus.size()))
    r.fail(nullptr, fmt::format("'{}_threads' = {} exceeds the {} CPUs of '{}_cpus'", prefix,
                                s.threads, s.cpus.size(), prefix));
  if (s.group.find('/') != std::string::npos || s.group == "." || s.group == "..")
    r.fail(nullptr, fmt::format("'{}_resctrl_group' must be a plain group name", prefix));
  return s;
}

void check_choice(SectionReader& r, const std::string& key, const std::string& v,
                  std::initializer_list<const char*> choices) {
  for (const char* c : choices)
    if (v == c) return;
  std::string list;
  for (const char* c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
  r.fail(nullptr, fmt::format("'{}' = \"{}\": expected one of {}", key, v, list));
}

}  // namespace

const char* role_name(Role r) {
  return r == Role::draft ? "draft" : "verify";
}

std::vector<int> target_weight_nodes(const std::string& layout, const std::vector<int>& nodes) {
  if (layout == "local" && nodes.size() > 1) return {nodes.front()};
  return nodes;
}

int side_threads(const Side& s) {
  return s.threads > 0 ? s.threads : static_cast<int>(s.cpus.size());
}

std::string weights_section(const LaunchPlan& p) {
  const auto& w = p.weights;
  toml::table t;
  t.insert("layout", w.layout);
  t.insert("hugepages", w.hugepages);
  t.insert("target_nodes", int_array(w.target_nodes));
  t.insert("draft_nodes", int_array(w.draft_nodes));
  std::string placement = w.layout == "interleave" ? "pages interleaved over the target nodes"
                          : w.layout == "split"    ? "layers split in contiguous blocks, block i "
                                                     "on target node i"
                                                   : "every layer on the first target node";
  return section("weights", "Step 7 (NUMA weight layout): " + placement + ".", t);
}

std::string spec_section(const LaunchPlan& p) {
  toml::table t;
  t.insert("draft_source", p.spec.draft_source);
  t.insert("draft_len", p.spec.draft_len);
  put_side(t, p.draft);
  put_side(t, p.verify);
  t.insert("housekeeping_cpus", common::format_cpulist(p.housekeeping_cpus));
  return section("spec",
                 "Step 8 (CCD speculative partition): the draft owns its L3 domains, the target "
                 "the rest.",
                 t);
}

std::string models_section(const LaunchPlan& p) {
  toml::table t;
  t.insert("target", p.models.target);
  if (!p.models.draft.empty()) t.insert("draft", p.models.draft);
  if (p.models.lookup > 0) t.insert("lookup", p.models.lookup);
  if (!p.profile.empty()) t.insert("profile", p.profile);
  return section("models", "What `epyctune run`/`bench` launches on this plan.", t);
}

std::string to_toml(const LaunchPlan& p) {
  std::string out;
  if (p.has_weights) out += weights_section(p);
  if (p.has_spec) out += spec_section(p);
  if (p.has_models) out += models_section(p);
  return out;
}

LaunchPlan parse_launch_config(std::string_view text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw LaunchConfigError(fmt::format("{}:{}:{}: not valid TOML: {}", source,
                                        e.source().begin.line, e.source().begin.column,
                                        e.description()));
  }
  LaunchPlan p;
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    if ((key != "weights" && key != "spec" && key != "models") || !v.is_table())
      throw LaunchConfigError(fmt::format(
          "{}:{}: unknown entry '{}': a launch config has only the sections [weights], [spec] "
          "and [models] (docs/launch-config.md)",
          source, v.source().begin.line, key));
  }
  if (const toml::table* w = root["weights"].as_table()) {
    SectionReader r(*w, source, "weights");
    p.has_weights = true;
    p.weights.layout = r.str("layout", "interleave");
    check_choice(r, "layout", p.weights.layout, {"interleave", "split", "local"});
    p.weights.hugepages = r.boolean("hugepages", true);
    p.weights.target_nodes = r.ints("target_nodes");
    p.weights.draft_nodes = r.ints("draft_nodes");
    r.no_unknown_keys();
  }
  if (const toml::table* s = root["spec"].as_table()) {
    SectionReader r(*s, source, "spec");
    p.has_spec = true;
    p.spec.draft_source = r.str("draft_source", "model");
    check_choice(r, "draft_source", p.spec.draft_source, {"model", "lookup", "cascade"});
    p.spec.draft_len = r.integer("draft_len", 8);
    p.draft = read_side(r, Role::draft);
    p.verify = read_side(r, Role::verify);
    p.housekeeping_cpus = r.cpulist("housekeeping_cpus");
    for (int c : p.draft.cpus)
      if (std::find(p.verify.cpus.begin(), p.verify.cpus.end(), c) != p.verify.cpus.end())
        r.fail(nullptr, fmt::format("'draft_cpus' and 'verify_cpus' overlap on CPU {}: the "
                                    "partition must be disjoint",
                                    c));
    r.no_unknown_keys();
  }
  if (const toml::table* m = root["models"].as_table()) {
    SectionReader r(*m, source, "models");
    p.has_models = true;
    p.models.target = r.str("target", "", true);
    p.models.draft = r.str("draft", "");
    p.models.lookup = r.integer("lookup", 0);
    p.profile = r.str("profile", "");
    r.no_unknown_keys();
  }
  if (!p.has_weights && !p.has_spec && !p.has_models)
    throw LaunchConfigError(source +
                            ": empty launch config: expected [weights], [spec] or [models]");
  return p;
}

LaunchPlan read_launch_config(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw LaunchConfigError(fmt::format(
        "{}: cannot read the launch config (written by `epyctune apply`, steps weights and "
        "spec; check the path)",
        file.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_launch_config(ss.str(), file.string());
}

}  // namespace epyctune::launch
