// `epyctune profile show`: the effective profile after includes, as JSON with
// the TOML key names, or as TOML-like text with each key's origin. Each
// section prints itself (section.hpp).
#include <fmt/format.h>

#include "profile/detect.hpp"
#include "profile/schema.hpp"
#include "profile/section.hpp"

namespace epyctune::profile {

using nlohmann::json;

json profile_to_json(const Profile& p) {
  json origins = json::object();
  for (const auto& [k, o] : p.origins)
    origins[k] = fmt::format("{}:{}:{}", o.file, o.line, o.column);
  json j{
      {"name", p.name},
      {"aliases", p.aliases},
      {"description", p.description},
      {"source_file", p.source_file},
      {"includes", p.includes},
      {"expectations",
       {{"source", p.expectations_source},
        {"model", p.expectations_model},
        {"tok_s", p.expectations}}},
      {"origins", origins},
  };
  for (const Section* s : detail::sections()) j[s->name] = s->show(p);
  return j;
}

std::string profile_to_text(const Profile& p) {
  std::string s = fmt::format("# {}: {}\n# from {}", p.name, p.description, p.source_file);
  for (const auto& inc : p.includes) s += fmt::format(", includes {}", inc);
  s += "\n";
  auto origin = [&](const std::string& key) {
    auto it = p.origins.find(key);
    return it == p.origins.end() ? std::string("(default)")
                                 : fmt::format("{}:{}", it->second.file, it->second.line);
  };
  if (!p.aliases.empty()) s += fmt::format("aliases = {}\n", json(p.aliases).dump());
  for (const Section* section : detail::sections()) {
    s += fmt::format("\n[{}]\n", section->name);
    // Sorted by key, as the JSON object orders them.
    std::map<std::string, std::string> lines;
    for (const auto& k : section->keys) {
      if (k.as == ShowAs::Hidden) continue;
      json v = k.show(p);
      std::string val = k.as == ShowAs::Hex && v.is_number_unsigned()
                            ? fmt::format("{:#x}", v.get<uint64_t>())
                            : v.dump();
      lines[k.name] = fmt::format("{:<44} # {}\n", fmt::format("{} = {}", k.name, val),
                                  origin(section->name + "." + k.name));
    }
    for (const auto& [k, line] : lines) s += line;
  }
  if (!p.hardware.notes.empty()) {
    s += "\n# Hardware notes:\n";
    for (const auto& n : p.hardware.notes) s += fmt::format("#  - {}\n", n);
  }
  s += fmt::format("\n[expectations]  # claims to compare with measurements; source: {}\n",
                   p.expectations_source.empty() ? "none given" : p.expectations_source);
  for (const auto& [k, v] : p.expectations)
    s += fmt::format("{} = {} tok/s{}\n", k, v,
                     p.expectations_model.empty() ? "" : " (" + p.expectations_model + ")");
  return s;
}

}  // namespace epyctune::profile
