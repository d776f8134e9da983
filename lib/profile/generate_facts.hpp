// What a generation of EPYC is, beyond what the topology shows: how its L3
// domains group into CCDs, its memory platform, its prefetch MSR, and the
// layout fact people get wrong. Internal to lib/profile (generate.cpp).
#pragma once

#include <optional>
#include <string>

#include "host/topology.hpp"

namespace epyctune::profile::detail {

struct Generation {
  std::string name;       // "Zen 4c"
  int l3_per_ccd = 1;     // L3 domains (CCXs) per CCD, or per die on Zen 1
  std::string ccd_word;   // "CCD", "die" on Naples
  bool prefetch_control;  // PrefetchControl (0xC0000108) documented for the family
  std::string layout;     // the L3 layout in one sentence, for hardware.notes
};

// Known microarchs ("zen" ... "zen5c"); an unknown one gets 1 L3 per CCD, no
// prefetch MSR, and a layout note saying so.
Generation generation_of(const std::string& microarch);

struct MemoryPlatform {
  int channels = 0;  // per socket
  std::string type;  // "DDR5-4800"
  int mts = 0;       // MT/s
  std::string why;   // "Genoa (SP5)", for the comment
  double bandwidth_gbs() const { return channels * mts * 8 / 1000.0; }
};

// The socket's memory from the codename; nullopt for parts whose platform
// the codename does not pin (Siena and EPYC 4004 share their codenames'
// cores but not their sockets).
std::optional<MemoryPlatform> memory_platform(const host::CpuIdentity& cpu);

// "9654" from "AMD EPYC 9654 96-Core Processor"; "" when the brand names no
// EPYC part (VMs show "AMD EPYC").
std::string part_number(const std::string& brand);

}  // namespace epyctune::profile::detail
