#include "host/cpu_identity.hpp"

#include <cpuid.h>
#include <libcpuid/libcpuid.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "common/text.hpp"

namespace epyctune::host {

using common::trim;
using common::valid_utf8;

namespace {

int to_int(std::string_view s, int base = 10) {
  int v = 0;
  auto t = trim(s);
  std::from_chars(t.data(), t.data() + t.size(), v, base);
  return v;
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  for (std::string w; in >> w;) out.push_back(valid_utf8(w));
  return out;
}

struct KnownPart {
  const char* number;  // in the brand: "EPYC 9754"
  int family, model;
};
// Only parts whose CPUID numbers we are sure of; the rest stay unknown.
// Turin (Zen 5) is family 1Ah models 00h-0Fh (the 9005 parts report 02h);
// Turin dense (Zen 5c) models 10h-1Fh (11h).
constexpr KnownPart kKnownParts[] = {
    {"EPYC 7451", 23, 0x01}, {"EPYC 7543", 25, 0x01}, {"EPYC 7763", 25, 0x01},
    {"EPYC 7713", 25, 0x01}, {"EPYC 9354", 25, 0x11}, {"EPYC 9654", 25, 0x11},
    {"EPYC 9554", 25, 0x11}, {"EPYC 9754", 25, 0xA0}, {"EPYC 9734", 25, 0xA0},
    {"EPYC 9655", 26, 0x02}, {"EPYC 9755", 26, 0x02}, {"EPYC 9965", 26, 0x11},
};

}  // namespace

bool CpuIdentity::has_flag(const std::string& f) const {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

std::string microarch_for(const std::string& vendor, int family, int model) {
  if (vendor != "AuthenticAMD") return "unknown";
  if (family == 0x17) return model >= 0x30 ? "zen2" : "zen";
  if (family == 0x19) {
    if (model >= 0xA0 && model <= 0xAF) return "zen4c";
    if ((model >= 0x10 && model <= 0x1F) || (model >= 0x60 && model <= 0x7F)) return "zen4";
    return "zen3";  // 00h-0Fh Milan, 20h-5Fh client Zen 3/3+
  }
  if (family == 0x1A) return model >= 0x10 && model <= 0x1F ? "zen5c" : "zen5";
  return "unknown";
}

std::string codename_for(const std::string& vendor, int family, int model) {
  if (vendor != "AuthenticAMD") return "";
  if (family == 0x17 && model == 0x01) return "Naples";
  if (family == 0x17 && model == 0x31) return "Rome";
  if (family == 0x19 && model <= 0x0F) return "Milan";
  if (family == 0x19 && model >= 0x10 && model <= 0x1F) return "Genoa";
  if (family == 0x19 && model >= 0xA0 && model <= 0xAF) return "Bergamo";
  if (family == 0x1A && model <= 0x0F) return "Turin";
  if (family == 0x1A && model >= 0x10 && model <= 0x1F) return "Turin Dense";
  return "";
}

CpuIdentity parse_cpuinfo_identity(std::string_view text) {
  CpuIdentity id;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) break;  // end of the first processor block
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(std::string_view(line).substr(0, colon));
    std::string_view val = std::string_view(line).substr(colon + 1);
    if (key == "vendor_id")
      id.vendor = valid_utf8(trim(val));
    else if (key == "cpu family")
      id.family = to_int(val);
    else if (key == "model")
      id.model = to_int(val);
    else if (key == "model name")
      id.os_model_name = valid_utf8(trim(val));
    else if (key == "stepping")
      id.stepping = to_int(val);
    else if (key == "flags")
      id.flags = split_words(val);
  }
  id.brand = id.os_model_name;
  id.hypervisor = id.has_flag("hypervisor");
  id.microarch = microarch_for(id.vendor, id.family, id.model);
  id.codename = codename_for(id.vendor, id.family, id.model);
  id.source = "cpuinfo";
  return id;
}

bool cpuid_dump_prefetch_control(std::string_view dump) {
  std::istringstream in{std::string(dump)};
  for (std::string line; std::getline(in, line);) {
    auto arrow = line.find("=>");
    if (arrow == std::string::npos) continue;
    auto ins = split_words(line.substr(0, arrow));
    auto outs = split_words(line.substr(arrow + 2));
    if (ins.size() < 1 || outs.size() < 4) continue;
    if (static_cast<uint32_t>(std::stoul(ins[0], nullptr, 16)) != 0x80000021u) continue;
    return (std::stoul(outs[0], nullptr, 16) >> 13) & 1u;
  }
  return false;
}

CpuIdentity identify_cpu(const Sysroot& root) {
  CpuIdentity id;
  if (auto text = root.read("/proc/cpuinfo")) id = parse_cpuinfo_identity(*text);
  if (!root.is_live()) {
    if (auto dump = root.read("/cpuid/pu0"))
      id.prefetch_control = cpuid_dump_prefetch_control(*dump);
    return id;
  }
  // Live: CPUID is the authority for the numbers, /proc/cpuinfo for the flags
  // the kernel actually enabled.
  cpu_raw_data_t raw{};
  cpu_id_t data{};
  if (cpuid_get_raw_data(&raw) == 0 && cpu_identify(&raw, &data) == 0) {
    id.vendor = valid_utf8(data.vendor_str);
    id.family = data.ext_family;
    id.model = data.ext_model;
    id.stepping = data.stepping;
    id.brand = valid_utf8(trim(data.brand_str));
    id.codename = data.cpu_codename;  // libcpuid's guess: a hint only
  }
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) id.hypervisor = (c >> 31) & 1u;
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000021u && __get_cpuid_count(0x80000021u, 0, &a, &b, &c, &d))
    id.prefetch_control = (a >> 13) & 1u;
  id.microarch = microarch_for(id.vendor, id.family, id.model);
  // Our table first: libcpuid 0.6.2 names a family-1Ah EPYC "Athlon X2
  // (Kuma)"; its guess stays only for parts the table does not know.
  if (auto ours = codename_for(id.vendor, id.family, id.model); !ours.empty()) id.codename = ours;
  id.source = "cpuid";
  return id;
}

CpuIdentity identity_from_hwloc_infos(const std::string& vendor, const std::string& family,
                                      const std::string& model, const std::string& stepping,
                                      const std::string& brand) {
  CpuIdentity id;
  id.brand = valid_utf8(trim(brand));
  id.os_model_name = id.brand;
  if (!vendor.empty() && !family.empty()) {
    id.vendor = valid_utf8(vendor);
    id.family = to_int(family);
    id.model = to_int(model);
    id.stepping = to_int(stepping);
    id.source = "hwloc-xml";
  } else {
    id.source = "brand";
    if (id.brand.find("AMD") != std::string::npos)
      id.vendor = "AuthenticAMD";
    else if (id.brand.find("Intel") != std::string::npos)
      id.vendor = "GenuineIntel";
    for (const auto& p : kKnownParts) {
      auto pos = id.brand.find(p.number);
      // "EPYC 9754" must not match "EPYC 97545".
      size_t end = pos + std::string_view(p.number).size();
      if (pos != std::string::npos &&
          (end == id.brand.size() || !std::isdigit(static_cast<unsigned char>(id.brand[end])))) {
        id.family = p.family;
        id.model = p.model;
        break;
      }
    }
  }
  id.microarch = microarch_for(id.vendor, id.family, id.model);
  id.codename = codename_for(id.vendor, id.family, id.model);
  return id;
}

}  // namespace epyctune::host
