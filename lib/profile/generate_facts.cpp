#include "profile/generate_facts.hpp"

#include <cctype>

namespace epyctune::profile::detail {

Generation generation_of(const std::string& m) {
  if (m == "zen")
    return {"Zen", 2, "die", false,
            "Zen (Naples): a die holds two CCXs of up to 4 cores, each with its own 8 MB L3, so "
            "an L3 domain is a CCX, half a die; by default (channel interleaving) every die is "
            "its own NUMA node, and only die interleaving makes one node per socket"};
  if (m == "zen2")
    return {"Zen 2", 2, "CCD", false,
            "Zen 2 (Rome): a CCD holds two CCXs of up to 4 cores, each with its own 16 MB L3, "
            "so an L3 domain is a CCX, half a CCD"};
  if (m == "zen3")
    return {"Zen 3", 1, "CCD", false,
            "Zen 3: a CCD is one CCX of up to 8 cores sharing 32 MB of L3: CCD = L3 domain"};
  if (m == "zen4")
    return {"Zen 4", 1, "CCD", true,
            "Zen 4: a CCD is one CCX of up to 8 cores sharing 32 MB of L3: CCD = L3 domain"};
  if (m == "zen4c")
    return {"Zen 4c", 2, "CCD", true,
            "Zen 4c: a CCD is two CCXs of 8 cores, each with its own 16 MB L3, so a CCD is two "
            "L3 domains"};
  if (m == "zen5")
    return {"Zen 5", 1, "CCD", true,
            "Zen 5: a CCD is one CCX of up to 8 cores sharing 32 MB of L3: CCD = L3 domain"};
  if (m == "zen5c")
    return {"Zen 5c", 1, "CCD", true,
            "Zen 5c: a CCD is one CCX of up to 16 cores sharing 32 MB of L3 (Zen 4c had two "
            "CCXs per CCD): CCD = L3 domain"};
  return {"an unknown generation", 1, "CCD", false,
          "unknown generation: each L3 domain is taken to be one CCD"};
}

std::optional<MemoryPlatform> memory_platform(const host::CpuIdentity& cpu) {
  // The first digit of an EPYC part number is its socket: 7 = SP3, 9 = SP5,
  // 8 = SP6 (Siena), 4 = AM5. Only SP3 and SP5 are known here.
  std::string part = part_number(cpu.brand);
  if (!part.empty() && part[0] != '7' && part[0] != '9') return std::nullopt;
  const std::string& c = cpu.codename;
  if (c == "Naples") return MemoryPlatform{8, "DDR4-2666", 2666, "Naples (SP3)"};
  if (c == "Rome" || c == "Milan") return MemoryPlatform{8, "DDR4-3200", 3200, c + " (SP3)"};
  if (c == "Genoa" || c == "Bergamo") return MemoryPlatform{12, "DDR5-4800", 4800, c + " (SP5)"};
  if (c == "Turin" || c == "Turin Dense")
    return MemoryPlatform{12, "DDR5-6000", 6000, c + " (SP5)"};
  return std::nullopt;
}

std::string part_number(const std::string& brand) {
  auto pos = brand.find("EPYC ");
  if (pos == std::string::npos) return "";
  pos += 5;
  size_t end = pos;
  while (end < brand.size() && end - pos < 8 &&
         std::isalnum(static_cast<unsigned char>(brand[end])))
    ++end;
  std::string part = brand.substr(pos, end - pos);
  if (part.size() < 4 || !std::isdigit(static_cast<unsigned char>(part[0]))) return "";
  return part;
}

}  // namespace epyctune::profile::detail
