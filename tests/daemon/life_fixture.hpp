// What the daemon's whole-life tests share: a 9754 fixture, a tiny model,
// a config file, and a byte-level snapshot of every file the profile's plan
// names (never whole fixture trees: MSR files are sparse and huge).
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "../cli_run.hpp"
#include "../fixture/fixture_cache.hpp"
#include "stack/session.hpp"
#include "test_util.hpp"

namespace epyctune::testing {

inline constexpr const char* kLifeProfile = "epyc-9754";

struct LifeHost {
  ScratchDir root;  // the fixture lives on tmpfs when it can
  std::filesystem::path sysroot = root.path() / "host";
  std::filesystem::path work = root.path() / "work";
  std::filesystem::path model = work / "tiny.gguf";
  std::filesystem::path config = work / "epyctune.toml";
  std::filesystem::path socket = work / "epyctuned.sock";

  LifeHost() {
    fixture::FixtureOptions o;
    o.machine = "9754";
    fixture::create_fixture(sysroot, o);
    std::filesystem::create_directories(work);
    auto r = run_cli(MKMODEL_BIN,
                     {"mkmodel", model.string(), "--shape", "tiny", "--quant", "q8_0", "-t", "1"});
    REQUIRE_MESSAGE(r.code == 0, r.err);
  }
  void write_config(const std::string& text) const { write_file(config, text); }
};

// Each file the plan names, as bytes: regular files under 1 MB whole, MSRs
// as their 8 bytes, directories as present/absent.
inline std::map<std::string, std::string> snapshot_plan_files(const stack::Session& s) {
  std::map<std::string, std::string> out;
  for (const auto& k : s.knobs) {
    const auto& loc = k.loc;
    if (loc.kind == stack::KnobKind::Cmdline || loc.kind == stack::KnobKind::Check ||
        loc.path.empty())
      continue;
    const std::string key =
        loc.kind == stack::KnobKind::Msr ? loc.path + "@" + std::to_string(loc.msr) : loc.path;
    const auto p = s.sys.resolve(loc.path);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      out[key] = "<absent>";
    } else if (S_ISDIR(st.st_mode)) {
      out[key] = "<dir>";
    } else if (loc.kind == stack::KnobKind::Msr) {
      char b[8] = {};
      int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
      ssize_t n = fd >= 0 ? ::pread(fd, b, 8, loc.msr) : -1;
      if (fd >= 0) ::close(fd);
      out[key] = n == 8 ? std::string(b, 8) : "<short>";
    } else if (S_ISREG(st.st_mode) && st.st_size < (1 << 20)) {
      out[key] = read_file(p);
    }
  }
  // The state directory's entries: the journal and the lock must be gone too.
  std::string entries;
  for (const auto& e : std::filesystem::directory_iterator(s.sys.resolve("/var/lib/epyctune")))
    entries += e.path().filename().string() + ";";
  out["/var/lib/epyctune/*"] = entries;
  return out;
}

inline std::string diff_snapshots(const std::map<std::string, std::string>& a,
                                  const std::map<std::string, std::string>& b) {
  std::string out;
  int n = 0;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    std::string after = it == b.end() ? "<not in the second snapshot>" : it->second;
    if (after != v && n++ < 10)
      out += k + ": \"" + v.substr(0, 60) + "\" -> \"" + after.substr(0, 60) + "\"\n";
  }
  for (const auto& [k, v] : b)
    if (!a.count(k) && n++ < 10) out += k + ": new \"" + v.substr(0, 60) + "\"\n";
  return out;
}

}  // namespace epyctune::testing
