// KeyReader: one TOML table of a profile read key by key, each bad value a
// diagnostic at its position that says how to fix it.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/cpulist.hpp"
#include "profile/schema.hpp"
#include "profile/section.hpp"

namespace epyctune::profile {

using detail::diag_at;
using detail::kMaxIdentifier;
using detail::shown;
using detail::type_name;

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The diagnostics of one table, at toml positions.
struct At {
  detail::TableState& s;
  std::string dotted(std::string_view key) const {
    return s.section.empty() ? std::string(key) : s.section + "." + std::string(key);
  }
  void error(const toml::source_region& r, std::string what, std::string fix) {
    s.ctx.diags.push_back(diag_at(r, s.ctx.file, std::move(what), std::move(fix)));
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
  // The key's node, its origin recorded; null when the table lacks it.
  const toml::node* node(const char* key) {
    const toml::node* n = s.table.get(key);
    if (n) {
      const auto& r = n->source();
      s.ctx.profile.origins[dotted(key)] = {s.ctx.file, static_cast<int>(r.begin.line),
                                            static_cast<int>(r.begin.column)};
    }
    return n;
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
};

}  // namespace

namespace detail {

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

std::string shown(std::string_view v, char quote) {
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

}  // namespace detail

void KeyReader::known(const std::vector<std::string>& keys) {
  At at{s_};
  for (const auto& [k, node] : s_.table) {
    std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    std::string where =
        s_.section.empty() ? "at the top level" : fmt::format("in [{}]", s_.section);
    std::string near = closest(key, keys);
    std::string fix = near.empty() ? fmt::format("valid keys: {}", join(keys))
                                   : fmt::format("did you mean '{}'?", near);
    at.error(k.source(), fmt::format("unknown key {} {}", shown(key, '\''), where), fix);
  }
}

bool KeyReader::has(const char* key) const {
  return s_.table.get(key) != nullptr;
}

std::string KeyReader::dotted(std::string_view key) const {
  return At{s_}.dotted(key);
}

void KeyReader::error(const char* key, std::string what, std::string fix) {
  At at{s_};
  if (const toml::node* n = s_.table.get(key))
    at.error(n->source(), std::move(what), std::move(fix));
  else
    at.error(s_.table.source(), std::move(what), std::move(fix));
}

void KeyReader::error_here(std::string what, std::string fix) {
  At{s_}.error(s_.table.source(), std::move(what), std::move(fix));
}

void KeyReader::get(const char* key, bool& out) {
  At at{s_};
  if (auto* n = at.node(key)) {
    if (auto v = n->value_exact<bool>())
      out = *v;
    else
      at.type_error(*n, key, "a boolean", "true or false");
  }
}

std::optional<int64_t> KeyReader::int_value(const char* key, int64_t lo, int64_t hi) {
  At at{s_};
  auto* n = at.node(key);
  if (!n) return std::nullopt;
  auto v = n->value_exact<int64_t>();
  if (!v) {
    at.type_error(*n, key, "an integer", fmt::format("{}", lo));
    return std::nullopt;
  }
  if (*v < lo || *v > hi) {
    at.range_error(*n, key, fmt::format("{}", *v), lo, hi);
    return std::nullopt;
  }
  return v;
}

void KeyReader::get(const char* key, double& out, double lo, double hi) {
  At at{s_};
  if (auto* n = at.node(key)) {
    std::optional<double> v;
    if (auto i = n->value_exact<int64_t>())
      v = static_cast<double>(*i);
    else if (auto d = n->value_exact<double>())
      v = *d;
    if (!v) return at.type_error(*n, key, "a number", fmt::format("{}", lo));
    if (!(*v >= lo && *v <= hi) || std::isnan(*v))
      return at.error(n->source(), fmt::format("{} = {} is out of range", at.dotted(key), *v),
                      fmt::format("use a value from {} to {}", lo, hi));
    out = *v;
  }
}

void KeyReader::get(const char* key, std::string& out, const std::vector<std::string>& allowed) {
  At at{s_};
  if (auto* n = at.node(key)) {
    auto v = n->value_exact<std::string>();
    if (!v)
      return at.type_error(*n, key, "a string",
                           allowed.empty() ? "\"...\"" : fmt::format("\"{}\"", allowed.front()));
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) {
      std::string near = closest(*v, allowed);
      return at.error(
          n->source(), fmt::format("{} = {} is not a valid value", at.dotted(key), shown(*v)),
          near.empty() ? fmt::format("use one of: {}", join(allowed))
                       : fmt::format("did you mean \"{}\"? (one of: {})", near, join(allowed)));
    }
    out = *v;
  }
}

void KeyReader::get_identifier(const char* key, std::string& out) {
  At at{s_};
  auto* n = at.node(key);
  if (!n) return;
  auto v = n->value_exact<std::string>();
  if (!v) return at.type_error(*n, key, "a string", "\"epyc-9754\"");
  if (auto why = detail::identifier_problem(*v); !why.empty())
    return at.error(n->source(), fmt::format("{} = {} {}", at.dotted(key), shown(*v), why),
                    fmt::format("use 1-{} of A-Z a-z 0-9 . _ -, starting with a letter or digit",
                                kMaxIdentifier));
  out = *v;
}

void KeyReader::get_text(const char* key, std::string& out, size_t max_len) {
  At at{s_};
  auto* n = at.node(key);
  if (!n) return;
  auto v = n->value_exact<std::string>();
  if (!v) return at.type_error(*n, key, "a string", "\"...\"");
  if (at.text_problem(*n, key, *v, max_len)) return;
  out = *v;
}

void KeyReader::get_texts(const char* key, std::vector<std::string>& out, size_t max_items,
                          size_t max_len) {
  At at{s_};
  std::vector<std::string> v;
  if (!at.node(key)) return;
  get(key, v);
  if (v.size() > max_items)
    return at.error(
        at.node(key)->source(),
        fmt::format("{} has {} entries, more than {}", at.dotted(key), v.size(), max_items),
        "shorten the list");
  for (const auto& s : v)
    if (at.text_problem(*at.node(key), key, s, max_len)) return;
  out = std::move(v);
}

void KeyReader::get_path(const char* key, std::string& out, std::string_view dir,
                         std::string_view ext, const std::string& example) {
  At at{s_};
  auto* n = at.node(key);
  if (!n) return;
  auto v = n->value_exact<std::string>();
  if (!v) return at.type_error(*n, key, "a path string", "\"" + example + "\"");
  std::string why = detail::path_problem(*v, dir, ext);
  if (!why.empty())
    return at.error(n->source(), fmt::format("{} = {} {}", at.dotted(key), shown(*v), why),
                    fmt::format("e.g. {} = \"{}\"", key, example));
  out = *v;
}

void KeyReader::get(const char* key, std::vector<std::string>& out) {
  At at{s_};
  if (auto* n = at.node(key)) {
    auto* arr = n->as_array();
    if (!arr) return at.type_error(*n, key, "an array of strings", "[\"...\"]");
    std::vector<std::string> v;
    for (const auto& e : *arr) {
      auto s = e.value_exact<std::string>();
      if (!s) return at.type_error(e, key, "an array of strings", "[\"...\"]");
      v.push_back(*s);
    }
    out = std::move(v);
  }
}

void KeyReader::get(const char* key, std::vector<int>& out, int64_t lo, int64_t hi) {
  At at{s_};
  if (auto* n = at.node(key)) {
    auto* arr = n->as_array();
    if (!arr) return at.type_error(*n, key, "an array of integers", "[0, 1]");
    std::vector<int> v;
    for (const auto& e : *arr) {
      auto i = e.value_exact<int64_t>();
      if (!i) return at.type_error(e, key, "an array of integers", "[0, 1]");
      if (*i < lo || *i > hi) return at.range_error(e, key, fmt::format("{}", *i), lo, hi);
      v.push_back(static_cast<int>(*i));
    }
    out = std::move(v);
  }
}

void KeyReader::get_cpulist(const char* key, std::vector<int>& out) {
  At at{s_};
  if (auto* n = at.node(key)) {
    auto s = n->value_exact<std::string>();
    if (!s) return at.type_error(*n, key, "a CPU list string", "\"0-1,128-129\"");
    try {
      out = common::parse_cpulist(*s);
    } catch (const std::invalid_argument& e) {
      at.error(n->source(), fmt::format("{}: {}", at.dotted(key), e.what()),
               "write CPU numbers and ranges separated by commas, e.g. \"0-1,128-129\"");
    }
  }
}

void KeyReader::get_cbm(const char* key, std::string& out) {
  At at{s_};
  if (auto* n = at.node(key)) {
    auto s = n->value_exact<std::string>();
    if (!s) return at.type_error(*n, key, "a hex mask string or \"all\"", "\"fff0\"");
    std::string hex = *s;
    if (hex != "all") {
      if (hex.rfind("0x", 0) == 0 || hex.rfind("0X", 0) == 0) hex = hex.substr(2);
      bool ok = !hex.empty() && hex.size() <= 16 && std::all_of(hex.begin(), hex.end(), [](char c) {
        return std::isxdigit(static_cast<unsigned char>(c));
      });
      if (!ok || std::stoull(hex, nullptr, 16) == 0)
        return at.error(n->source(),
                        fmt::format("{} = \"{}\" is not a cache way mask", at.dotted(key), *s),
                        "write a non-zero hex mask such as \"fff0\", or \"all\"");
      std::transform(hex.begin(), hex.end(), hex.begin(),
                     [](char c) { return static_cast<char>(std::tolower(c)); });
    }
    out = hex;
  }
}

void KeyReader::get_freq(const char* key, std::string& out) {
  At at{s_};
  if (auto* n = at.node(key)) {
    if (auto i = n->value_exact<int64_t>()) {
      if (*i < 400000 || *i > 10000000)
        return at.error(
            n->source(),
            fmt::format("{} = {} is not a plausible frequency in kHz", at.dotted(key), *i),
            "give kHz (e.g. 2250000 for 2.25 GHz), or \"max\" / \"min\"");
      out = std::to_string(*i);
    } else if (auto s = n->value_exact<std::string>(); s && (*s == "max" || *s == "min")) {
      out = *s;
    } else {
      at.error(n->source(),
               fmt::format("{} must be \"max\", \"min\" or a frequency in kHz", at.dotted(key)),
               "e.g. verify_freq = 2250000");
    }
  }
}

std::optional<std::string> KeyReader::if_string(const char* key) {
  const toml::node* n = s_.table.get(key);
  if (!n || !n->value_exact<std::string>()) return std::nullopt;
  At{s_}.node(key);
  return *n->value_exact<std::string>();
}

bool KeyReader::each_table(const char* key, const char* example,
                           const std::function<void(KeyReader&)>& read) {
  At at{s_};
  auto* n = at.node(key);
  if (!n) return false;
  auto* arr = n->as_array();
  if (!arr || !arr->is_array_of_tables()) {
    at.type_error(*n, key, "an array of tables", example);
    return false;
  }
  for (const auto& e : *arr) {
    detail::TableState entry{*e.as_table(), at.dotted(key), s_.ctx};
    KeyReader r(entry);
    read(r);
  }
  return true;
}

void Checker::error(const std::string& key, std::string what, std::string fix) {
  auto it = p_.origins.find(key);
  if (it != p_.origins.end())
    diags_.push_back(
        {it->second.file, it->second.line, it->second.column, std::move(what), std::move(fix)});
  else
    diags_.push_back({p_.source_file.empty() ? p_.name : p_.source_file, 0, 0,
                      fmt::format("{}: {}", key, what), std::move(fix)});
}

void Checker::finish() {
  if (!diags_.empty()) throw ProfileError(std::move(diags_));
}

std::vector<std::string> Section::key_names() const {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

void Section::read(KeyReader& r, Profile& p) const {
  r.known(key_names());
  for (const auto& k : keys) k.read(r, p);
}

nlohmann::json Section::show(const Profile& p) const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& k : keys) j[k.name] = k.show(p);
  return j;
}

}  // namespace epyctune::profile
