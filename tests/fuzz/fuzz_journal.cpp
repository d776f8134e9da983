// libFuzzer target: the journal reader through its public API (Journal::load
// on a sysroot holding the bytes as its journal), so it follows whatever
// format the journal has. Anything but a clean JournalError or HostError is
// a finding.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "stack/journal.hpp"

using namespace epyctune;

namespace {
// One private sysroot for the whole run: the journal file is rewritten per input.
const std::filesystem::path& root() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("epyctune-fuzz-journal-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d / "var/lib/epyctune");
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(root() / "var/lib/epyctune/journal", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  host::Sysroot sys(root());
  try {
    auto c = stack::Journal(sys).load();
    for (const auto& e : c.entries)
      if (e.line < 1) std::abort();
  } catch (const stack::JournalError&) {
  } catch (const host::HostError&) {
  }
  return 0;
}
