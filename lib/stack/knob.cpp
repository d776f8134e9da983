#include "stack/knob.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "common/cpulist.hpp"
#include "stack/host_writes.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

using nlohmann::json;

std::string to_string(KnobKind k) {
  switch (k) {
    case KnobKind::Value:
      return "value";
    case KnobKind::File:
      return "file";
    case KnobKind::Dir:
      return "dir";
    case KnobKind::Msr:
      return "msr";
    case KnobKind::Schemata:
      return "schemata";
    case KnobKind::Cmdline:
      return "cmdline";
    case KnobKind::Check:
      return "check";
  }
  return "?";
}

std::string to_string(Canon c) {
  switch (c) {
    case Canon::Plain:
      return "plain";
    case Canon::Choice:
      return "choice";
    case Canon::Cpulist:
      return "cpulist";
    case Canon::Cpumask:
      return "cpumask";
    case Canon::Int:
      return "int";
    case Canon::FlagsCpulist:
      return "flags-cpulist";
  }
  return "?";
}

namespace {

KnobKind kind_from(const std::string& s) {
  for (auto k : {KnobKind::Value, KnobKind::File, KnobKind::Dir, KnobKind::Msr, KnobKind::Schemata,
                 KnobKind::Cmdline, KnobKind::Check})
    if (to_string(k) == s) return k;
  throw std::runtime_error(fmt::format("unknown knob kind '{}'", s));
}

Canon canon_from(const std::string& s) {
  for (auto c : {Canon::Plain, Canon::Choice, Canon::Cpulist, Canon::Cpumask, Canon::Int,
                 Canon::FlagsCpulist})
    if (to_string(c) == s) return c;
  throw std::runtime_error(fmt::format("unknown canonicalisation '{}'", s));
}

template <typename T>
T field(const json& j, const char* name) {
  if (!j.contains(name)) throw std::runtime_error(fmt::format("missing field '{}'", name));
  try {
    return j.at(name).get<T>();
  } catch (const json::exception&) {
    throw std::runtime_error(fmt::format("field '{}' has the wrong type", name));
  }
}

std::string choice_of(const std::string& text) {
  auto open = text.find('[');
  auto close = text.find(']', open == std::string::npos ? 0 : open);
  if (open != std::string::npos && close != std::string::npos)
    return text.substr(open + 1, close - open - 1);
  return trim(text);
}

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

}  // namespace

std::string KnobLocation::key() const {
  switch (kind) {
    case KnobKind::Msr:
      return fmt::format("msr:{}:{:#x}:{:#x}", cpu, msr, mask);
    case KnobKind::Schemata:
      return fmt::format("schemata:{}:{}", path, domain);
    case KnobKind::File:
      return fmt::format("file:{}:{}", path, section);
    case KnobKind::Cmdline:
      return fmt::format("cmdline:{}", param);
    case KnobKind::Check:
      return fmt::format("check:{}", param);
    default:
      return fmt::format("{}:{}", to_string(kind), path);
  }
}

json KnobLocation::to_json() const {
  json j{{"kind", to_string(kind)}, {"path", path}};
  switch (kind) {
    case KnobKind::Value:
      j["canon"] = to_string(canon);
      break;
    case KnobKind::File:
      j["section"] = section;
      break;
    case KnobKind::Msr:
      j["cpu"] = cpu;
      j["msr"] = hex(msr);
      j["mask"] = hex(mask);
      break;
    case KnobKind::Schemata:
      j["domain"] = domain;
      break;
    case KnobKind::Cmdline:
      j["param"] = param;
      j["canon"] = to_string(canon);
      break;
    case KnobKind::Check:
      j["param"] = param;
      break;
    case KnobKind::Dir:
      break;
  }
  return j;
}

KnobLocation KnobLocation::from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("knob location is not an object");
  KnobLocation l;
  l.kind = kind_from(field<std::string>(j, "kind"));
  l.path = field<std::string>(j, "path");
  if (l.path.empty() || l.path.front() != '/')
    throw std::runtime_error(fmt::format("path '{}' is not absolute", l.path));
  switch (l.kind) {
    case KnobKind::Value:
      l.canon = canon_from(field<std::string>(j, "canon"));
      break;
    case KnobKind::File:
      l.section = field<std::string>(j, "section");
      break;
    case KnobKind::Msr:
      l.cpu = field<int>(j, "cpu");
      l.msr = static_cast<uint32_t>(parse_u64(field<std::string>(j, "msr")));
      l.mask = parse_u64(field<std::string>(j, "mask"));
      break;
    case KnobKind::Schemata:
      l.domain = field<int>(j, "domain");
      break;
    case KnobKind::Cmdline:
      l.param = field<std::string>(j, "param");
      l.canon = canon_from(field<std::string>(j, "canon"));
      break;
    case KnobKind::Check:
      l.param = field<std::string>(j, "param");
      break;
    case KnobKind::Dir:
      break;
  }
  return l;
}

namespace {

// A JSON string holds only UTF-8: other bytes go as {"base64": ...} so they
// come back exactly.
json bytes_to_json(const std::string& s) {
  if (is_utf8(s)) return s;
  return json{{"base64", base64_encode(s)}};
}

std::string bytes_field(const json& j, const char* name) {
  if (!j.contains(name)) throw std::runtime_error(fmt::format("missing field '{}'", name));
  const json& f = j.at(name);
  if (f.is_string()) return f.get<std::string>();
  if (f.is_object() && f.contains("base64") && f.at("base64").is_string()) {
    if (auto bytes = base64_decode(f.at("base64").get<std::string>())) return *bytes;
    throw std::runtime_error(fmt::format("field '{}' is not valid base64", name));
  }
  throw std::runtime_error(fmt::format("field '{}' has the wrong type", name));
}

}  // namespace

json KnobValue::to_json() const {
  return json{{"present", present},
              {"value", bytes_to_json(value)},
              {"raw", bytes_to_json(raw)},
              {"input", bytes_to_json(input)}};
}

KnobValue KnobValue::from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("knob value is not an object");
  KnobValue v;
  v.present = field<bool>(j, "present");
  v.value = bytes_field(j, "value");
  v.raw = bytes_field(j, "raw");
  v.input = bytes_field(j, "input");
  return v;
}

std::string canonical(Canon canon, const std::string& text) {
  switch (canon) {
    case Canon::Plain:
      return trim(text);
    case Canon::Choice:
      return choice_of(text);
    case Canon::Int: {
      auto t = trim(text);
      try {
        return std::to_string(std::stoll(t));
      } catch (const std::exception&) {
        return t;
      }
    }
    case Canon::Cpulist:
      return common::format_cpulist(common::parse_cpulist(trim(text)));
    case Canon::Cpumask:
      return common::format_cpulist(common::parse_cpumask(trim(text)));
    case Canon::FlagsCpulist: {
      // "domain,managed_irq,2-5": flags in any order, then CPU ranges.
      std::vector<std::string> flags;
      std::string cpus;
      std::stringstream ss(trim(text));
      std::string tok;
      while (std::getline(ss, tok, ',')) {
        if (!tok.empty() && std::isalpha(static_cast<unsigned char>(tok[0])))
          flags.push_back(tok);
        else
          cpus += (cpus.empty() ? "" : ",") + tok;
      }
      std::sort(flags.begin(), flags.end());
      std::string out;
      for (const auto& f : flags) out += f + ",";
      return out + common::format_cpulist(common::parse_cpulist(cpus));
    }
  }
  return text;
}

KnobValue read_location(const host::Sysroot& sys, const KnobLocation& loc) {
  KnobValue v;
  switch (loc.kind) {
    case KnobKind::Value: {
      auto raw = sys.read(loc.path);
      if (!raw) return v;
      v.present = true;
      v.raw = *raw;
      v.input = loc.canon == Canon::Choice ? choice_of(*raw) : trim(*raw);
      v.value = canonical(loc.canon, *raw);
      return v;
    }
    case KnobKind::File: {
      auto raw = sys.read(loc.path);
      if (!raw) return v;
      v.present = true;
      v.raw = *raw;
      v.value = loc.section.empty() ? *raw : toml_section(*raw, loc.section).value_or("");
      return v;
    }
    case KnobKind::Dir:
      v.present = sys.is_dir(loc.path);
      v.value = v.present ? "present" : "absent";
      return v;
    case KnobKind::Msr: {
      uint64_t m = sys.read_msr(loc.cpu, loc.msr);
      v.present = true;
      v.raw = hex(m);
      v.value = hex(m & loc.mask);
      v.input = v.raw;
      return v;
    }
    case KnobKind::Schemata: {
      auto raw = sys.read(loc.path);
      if (!raw) return v;
      auto token = schemata_domain(*raw, loc.domain);
      if (!token) return v;
      v.present = true;
      v.raw = *token;
      v.input = *token;
      v.value = fmt::format("{:x}", parse_u64("0x" + *token));
      return v;
    }
    case KnobKind::Cmdline: {
      auto raw = sys.read(loc.path);
      if (!raw) return v;
      auto arg = cmdline_param(*raw, loc.param);
      if (!arg) return v;
      v.present = true;
      v.raw = *arg;
      v.input = *arg;
      v.value = canonical(loc.canon, *arg);
      return v;
    }
    case KnobKind::Check:
      throw std::logic_error("a check knob has no location to read");
  }
  return v;
}

KnobValue read_knob(const host::Sysroot& sys, const Knob& knob) {
  if (knob.loc.kind == KnobKind::Check) {
    KnobValue v;
    v.present = true;
    v.value = v.raw = v.input = knob.observed;
    return v;
  }
  return read_location(sys, knob.loc);
}

bool knob_matches(const KnobLocation& loc, const KnobValue& cur, const std::string& desired) {
  switch (loc.kind) {
    case KnobKind::Value:
    case KnobKind::Cmdline:
      return cur.present && cur.value == canonical(loc.canon, desired);
    case KnobKind::File:
      return cur.present && cur.value == desired;
    case KnobKind::Dir:
      return cur.present == (desired == "present");
    case KnobKind::Msr:
      return cur.present && cur.value == hex(parse_u64(desired) & loc.mask);
    case KnobKind::Schemata:
      return cur.present && parse_u64("0x" + cur.value) == parse_u64("0x" + trim(desired));
    case KnobKind::Check:
      return trim(cur.value) == trim(desired);
  }
  return false;
}

namespace {

void write_schemata(const host::Sysroot& sys, const KnobLocation& loc, const std::string& mask) {
  if (is_kernel_fs(sys, loc.path)) {
    // resctrl merges a partial line: only this domain changes.
    host_write(sys, loc.path, fmt::format("L3:{}={}\n", loc.domain, mask));
    return;
  }
  auto raw = sys.read(loc.path);
  std::string merged = merge_schemata_domain(raw.value_or(""), loc.domain, mask);
  if (raw)
    host_write(sys, loc.path, merged);
  else
    host_write_file(sys, loc.path, merged);
}

}  // namespace

void write_knob(const host::Sysroot& sys, const KnobLocation& loc, const std::string& desired) {
  switch (loc.kind) {
    case KnobKind::Value:
      host_write(sys, loc.path, desired + "\n");
      return;
    case KnobKind::File: {
      if (loc.section.empty()) {
        host_write_file(sys, loc.path, desired);
        return;
      }
      auto raw = sys.read(loc.path);
      host_write_file(sys, loc.path, replace_toml_section(raw.value_or(""), loc.section, desired));
      return;
    }
    case KnobKind::Dir:
      if (desired == "present")
        host_make_dir(sys, loc.path);
      else
        host_remove_dir(sys, loc.path);
      return;
    case KnobKind::Msr: {
      uint64_t cur = sys.read_msr(loc.cpu, loc.msr);
      uint64_t next = (cur & ~loc.mask) | (parse_u64(desired) & loc.mask);
      host_write_msr(sys, loc.cpu, loc.msr, next);
      return;
    }
    case KnobKind::Schemata:
      write_schemata(sys, loc, trim(desired));
      return;
    case KnobKind::Cmdline:
    case KnobKind::Check:
      throw std::logic_error(fmt::format("{} is read-only", loc.key()));
  }
}

void restore_knob(const host::Sysroot& sys, const KnobLocation& loc, const KnobValue& orig) {
  switch (loc.kind) {
    case KnobKind::Value: {
      if (!orig.present) return;  // absent attributes are never written
      auto cur = read_location(sys, loc);
      if (is_kernel_fs(sys, loc.path)) {
        if (!cur.present || cur.value != orig.value) host_write(sys, loc.path, orig.input + "\n");
      } else if (!cur.present || cur.raw != orig.raw) {
        host_write(sys, loc.path, orig.raw);
      }
      return;
    }
    case KnobKind::File: {
      auto cur = sys.read(loc.path);
      if (!orig.present) {
        if (cur) host_remove_file(sys, loc.path);
      } else if (!cur || *cur != orig.raw) {
        host_write_file(sys, loc.path, orig.raw);
      }
      return;
    }
    case KnobKind::Dir:
      if (!orig.present && sys.is_dir(loc.path)) host_remove_dir(sys, loc.path);
      if (orig.present && !sys.exists(loc.path)) host_make_dir(sys, loc.path);
      return;
    case KnobKind::Msr: {
      uint64_t cur = sys.read_msr(loc.cpu, loc.msr);
      uint64_t want = (cur & ~loc.mask) | (parse_u64(orig.raw) & loc.mask);
      if (want != cur) host_write_msr(sys, loc.cpu, loc.msr, want);
      return;
    }
    case KnobKind::Schemata: {
      // An absent domain belongs to a group we created; removing the group
      // (its Dir knob, replayed after this one) takes the schemata with it.
      if (!orig.present || !sys.exists(loc.path)) return;
      auto cur = read_location(sys, loc);
      if (!cur.present || cur.raw != orig.raw) write_schemata(sys, loc, orig.input);
      return;
    }
    case KnobKind::Cmdline:
    case KnobKind::Check:
      return;
  }
}

}  // namespace epyctune::stack
