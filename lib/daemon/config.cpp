#include "daemon/config.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "common/cpulist.hpp"
#include "common/input_file.hpp"
#include "common/kv_budget.hpp"

namespace epyctune::daemon {

namespace {

constexpr const char* kDocs = "docs/daemon.md lists every key";

// Reads one table's keys, remembering which it read, so that anything left
// over is reported as unknown with its line.
class Reader {
 public:
  Reader(const toml::table& t, std::string source, std::string where, int line)
      : t_(t), source_(std::move(source)), where_(std::move(where)), line_(line) {}

  [[noreturn]] void fail(const toml::node* n, const std::string& what) const {
    int line = n ? static_cast<int>(n->source().begin.line) : line_;
    std::string at = where_.empty() ? "" : where_ + " ";
    throw ConfigError(line > 0 ? fmt::format("{}:{}: {}{}", source_, line, at, what)
                               : fmt::format("{}: {}{}", source_, at, what));
  }
  const toml::node* get(const std::string& key) {
    seen_.insert(key);
    return t_.get(key);
  }
  void str(const std::string& key, std::string& out, bool required = false) {
    const toml::node* n = get(key);
    if (!n) {
      if (required) fail(nullptr, fmt::format("missing key '{}' ({})", key, kDocs));
      return;
    }
    auto v = n->value<std::string>();
    if (!v || !n->is_string())
      fail(n, fmt::format("'{}' must be a string, e.g. {} = \"...\"", key, key));
    out = *v;
  }
  void boolean(const std::string& key, bool& out) {
    const toml::node* n = get(key);
    if (!n) return;
    if (!n->is_boolean()) fail(n, fmt::format("'{}' must be true or false", key));
    out = *n->value<bool>();
  }
  void integer(const std::string& key, int& out, int lo, int hi) {
    const toml::node* n = get(key);
    if (!n) return;
    if (!n->is_integer()) fail(n, fmt::format("'{}' must be an integer", key));
    int64_t v = *n->value<int64_t>();
    if (v < lo || v > hi)
      fail(n, fmt::format("'{}' = {} is out of range: use a value from {} to {}", key, v, lo, hi));
    out = static_cast<int>(v);
  }
  const toml::node* node(const std::string& key) { return get(key); }
  void no_unknown_keys() const {
    for (const auto& [k, v] : t_)
      if (!seen_.count(std::string(k.str())))
        fail(&v, fmt::format("unknown key '{}' ({})", k.str(), kDocs));
  }

 private:
  const toml::table& t_;
  std::string source_, where_;
  int line_;
  std::set<std::string> seen_;
};

bool valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

void check_cpulist(Reader& r, const toml::node* n, const std::string& key,
                   const std::string& text) {
  if (text.empty()) return;
  try {
    if (common::parse_cpulist(text).empty()) r.fail(n, fmt::format("'{}' names no CPU", key));
  } catch (const std::invalid_argument& e) {
    r.fail(n,
           fmt::format("'{}' = \"{}\": {} (a CPU list such as \"8-15,24\")", key, text, e.what()));
  }
}

InstanceConfig read_instance(const toml::table& t, const std::string& source, int index) {
  InstanceConfig i;
  i.line = static_cast<int>(t.source().begin.line);
  Reader r(t, source, fmt::format("[[instance]] #{}:", index + 1), i.line);
  r.str("name", i.name, true);
  if (!valid_name(i.name))
    r.fail(t.get("name"),
           fmt::format("name \"{}\" must be 1-64 letters, digits, '-' or '_'", i.name));
  r.str("model", i.model, true);
  if (i.model.empty()) r.fail(t.get("model"), "'model' is empty: give the GGUF file's path");
  r.str("draft", i.draft);
  r.str("host", i.host);
  if (i.host.empty()) r.fail(t.get("host"), "'host' is empty: use 127.0.0.1 or an address");
  r.integer("port", i.port, 0, 65535);
  r.integer("queue", i.queue, 0, 100000);
  r.integer("parallel", i.parallel, 0, 256);
  r.str("kv_budget", i.kv_budget);
  if (!i.kv_budget.empty()) {
    try {
      common::parse_kv_budget(i.kv_budget);
    } catch (const std::invalid_argument& e) {
      r.fail(t.get("kv_budget"), fmt::format("'kv_budget': {}", e.what()));
    }
  }
  r.integer("threads", i.threads, 0, 8192);
  r.str("cpus", i.cpus);
  check_cpulist(r, t.get("cpus"), "cpus", i.cpus);
  r.str("draft_cpus", i.draft_cpus);
  check_cpulist(r, t.get("draft_cpus"), "draft_cpus", i.draft_cpus);
  if (!i.draft_cpus.empty() && i.draft.empty())
    r.fail(t.get("draft_cpus"),
           "'draft_cpus' is set but the instance has no 'draft' model: "
           "remove draft_cpus or add draft = \"FILE.gguf\"");
  r.no_unknown_keys();
  return i;
}

void read_drift(const toml::table& t, const std::string& source, DriftConfig& d) {
  Reader r(t, source, "[drift]", static_cast<int>(t.source().begin.line));
  r.integer("interval_s", d.interval_s, 0, 7 * 86400);
  r.boolean("repair", d.repair);
  r.boolean("uevents", d.uevents);
  r.integer("debounce_ms", d.debounce_ms, 0, 600000);
  r.no_unknown_keys();
}

void read_engine(const toml::table& t, const std::string& source, EngineProcessConfig& e) {
  Reader r(t, source, "[engine]", static_cast<int>(t.source().begin.line));
  r.str("binary", e.binary);
  r.boolean("map_cpus", e.map_cpus);
  r.str("shared_weights", e.shared_weights);
  r.integer("ready_timeout_s", e.ready_timeout_s, 1, 86400);
  r.integer("stop_timeout_s", e.stop_timeout_s, 1, 3600);
  r.integer("restart_backoff_ms", e.restart_backoff_ms, 10, 3600000);
  r.integer("restart_backoff_max_ms", e.restart_backoff_max_ms, 10, 3600000);
  r.integer("restart_stable_s", e.restart_stable_s, 1, 86400);
  r.integer("max_restarts", e.max_restarts, 0, 1000000);
  if (e.restart_backoff_max_ms < e.restart_backoff_ms)
    r.fail(t.get("restart_backoff_max_ms"),
           "'restart_backoff_max_ms' is below 'restart_backoff_ms': raise it or lower the other");
  r.no_unknown_keys();
}

// Instances on explicit CPUs must not share one; carved ones are checked
// against each other once the plan is known (instances.cpp).
void check_explicit_overlap(const Config& c) {
  std::map<int, std::string> owner;
  for (const auto& i : c.instances)
    for (const auto* key : {"cpus", "draft_cpus"}) {
      const std::string& text = std::string(key) == "cpus" ? i.cpus : i.draft_cpus;
      for (int cpu : common::parse_cpulist(text)) {
        auto [it, fresh] = owner.emplace(cpu, i.name + "." + key);
        if (!fresh)
          throw ConfigError(fmt::format(
              "{}:{}: [[instance]] {}: {} overlaps {} on CPU {}: instances need disjoint CPUs; "
              "change one of the lists",
              c.source, i.line, i.name, key, it->second, cpu));
      }
    }
}

}  // namespace

Config parse_config(std::string_view text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}:{}: not valid TOML: {}", source, e.source().begin.line,
                                  e.source().begin.column, e.description()));
  }
  Config c;
  c.source = source;
  Reader r(root, source, "", 0);
  r.str("profile", c.profile, true);
  if (c.profile.empty())
    r.fail(root.get("profile"), "'profile' is empty: name a built-in profile or a TOML file");
  r.str("steps", c.steps);
  r.boolean("force", c.force);
  r.boolean("apply_on_start", c.apply_on_start);
  r.boolean("revert_on_stop", c.revert_on_stop);
  r.boolean("revert_on_shutdown", c.revert_on_shutdown);
  r.str("metrics_textfile", c.metrics_textfile);
  if (!c.metrics_textfile.empty() && c.metrics_textfile.front() != '/')
    r.fail(root.get("metrics_textfile"),
           "'metrics_textfile' must be an absolute path such as "
           "\"/var/lib/prometheus/node-exporter/epyctune.prom\"");
  for (const char* section : {"drift", "engine"}) {
    const toml::node* n = r.node(section);
    if (!n) continue;
    const toml::table* t = n->as_table();
    if (!t)
      r.fail(n, fmt::format("'{}' must be a table: write [{}] on its own line", section, section));
    if (std::string(section) == "drift")
      read_drift(*t, source, c.drift);
    else
      read_engine(*t, source, c.engine);
  }
  if (const toml::node* n = r.node("instance")) {
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      r.fail(n, "'instance' must be an array of tables: write each one as [[instance]]");
    std::set<std::string> names;
    std::map<std::pair<std::string, int>, std::string> ports;
    for (size_t k = 0; k < a->size(); ++k) {
      auto inst = read_instance(*a->get(k)->as_table(), source, static_cast<int>(k));
      if (!names.insert(inst.name).second)
        throw ConfigError(
            fmt::format("{}:{}: [[instance]] name \"{}\" is used twice: names must "
                        "be unique",
                        source, inst.line, inst.name));
      if (inst.port != 0) {
        auto [it, fresh] = ports.emplace(std::pair{inst.host, inst.port}, inst.name);
        if (!fresh)
          throw ConfigError(
              fmt::format("{}:{}: [[instance]] {}: port {} is already used by "
                          "instance {}: give each instance its own port",
                          source, inst.line, inst.name, inst.port, it->second));
      }
      c.instances.push_back(std::move(inst));
    }
  }
  r.no_unknown_keys();
  check_explicit_overlap(c);
  return c;
}

Config load_config(const std::string& path) {
  std::string text;
  try {
    text = common::read_input_file(path, common::kMaxProfileBytes, "daemon config");
  } catch (const common::InputFileError& e) {
    throw ConfigError(std::string(e.what()) +
                      " (pass --config FILE; the package installs /etc/epyctune/epyctune.toml)");
  }
  return parse_config(text, path);
}

}  // namespace epyctune::daemon
