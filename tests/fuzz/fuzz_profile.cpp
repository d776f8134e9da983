// libFuzzer target: the profile loader (TOML syntax, schema, string and CPU
// list checks, cross-key validation) and `profile show` on arbitrary text.
// Anything but a clean ProfileError is a finding. See README.md here.
#include <cstdlib>
#include <string>

#include "profile/detect.hpp"
#include "profile/loader.hpp"

using namespace epyctune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  profile::Profile p;
  try {
    // Includes resolve against the working directory: the built-ins are
    // what the corpus names.
    p = profile::load_profile_text(text, "fuzz.toml");
  } catch (const profile::ProfileError&) {
    return 0;
  }
  // An accepted profile upholds what the loader promises the stack.
  if (p.name.empty() || p.name.size() > 64 || p.name.find('\n') != std::string::npos) std::abort();
  if (p.isolation.bootloader_dropin.rfind("/etc/default/grub.d/", 0) != 0) std::abort();
  (void)profile::profile_to_text(p);
  (void)profile::profile_to_json(p).dump();
  return 0;
}
