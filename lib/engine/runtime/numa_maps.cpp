#include "engine/runtime/numa_maps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace epyctune::engine::runtime {
namespace {

bool parse_u64(std::string_view s, uint64_t& out, int base = 10) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

std::vector<NumaMapsEntry> parse_numa_maps(std::string_view text) {
  std::vector<NumaMapsEntry> out;
  int line_no = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    auto bad = [&](const std::string& why) {
      return std::runtime_error(fmt::format("numa_maps line {}: {} in '{}'", line_no, why, line));
    };
    std::vector<std::string_view> tok;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ') ++j;
      if (j > i) tok.push_back(line.substr(i, j - i));
      i = j;
    }
    if (tok.empty()) continue;
    if (tok.size() < 2) throw bad("expected '<address> <policy> ...'");
    NumaMapsEntry e;
    if (!parse_u64(tok[0], e.start, 16)) throw bad("bad address");
    e.policy = std::string(tok[1]);
    for (size_t k = 2; k < tok.size(); ++k) {
      std::string_view t = tok[k];
      if (t == "huge") {
        e.huge = true;
        continue;
      }
      auto eq = t.find('=');
      if (eq == std::string_view::npos) continue;  // flags like "heap", "stack"
      std::string_view key = t.substr(0, eq), val = t.substr(eq + 1);
      if (key == "file") {
        e.file = std::string(val);
      } else if (key == "kernelpagesize_kB") {
        uint64_t kb;
        if (!parse_u64(val, kb)) throw bad("bad kernelpagesize_kB");
        e.page_size = kb * 1024;
      } else if (key.size() >= 2 && key[0] == 'N' && key[1] >= '0' && key[1] <= '9') {
        uint64_t node, pages;
        if (!parse_u64(key.substr(1), node) || !parse_u64(val, pages))
          throw bad(fmt::format("bad node count '{}'", t));
        e.pages[static_cast<int>(node)] += pages;
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

uint64_t Placement::total_bytes() const {
  uint64_t t = 0;
  for (auto& [n, b] : bytes_per_node) t += b;
  return t;
}

std::string Placement::summary() const {
  uint64_t total = total_bytes();
  if (total == 0) return "no resident weight pages found in numa_maps";
  std::string s;
  for (auto& [node, b] : bytes_per_node) {
    if (!s.empty()) s += ", ";
    s += fmt::format("node{} {:.2f} GiB ({:.0f}%)", node, b / 1073741824.0, 100.0 * b / total);
  }
  s += fmt::format("; pages {}", page_size >= (1u << 20) ? fmt::format("{} MiB", page_size >> 20)
                                                         : fmt::format("{} KiB", page_size >> 10));
  std::string pol;
  for (auto& p : policies) pol += (pol.empty() ? "" : ",") + p;
  s += "; policy " + pol;
  return s;
}

Placement placement_of(const std::vector<NumaMapsEntry>& entries,
                       const std::vector<AddressRange>& ranges) {
  Placement p;
  for (const auto& e : entries) {
    bool in = false;
    for (const auto& r : ranges) in = in || (e.start >= r.begin && e.start < r.end);
    if (!in) continue;
    for (auto& [node, pages] : e.pages) p.bytes_per_node[node] += pages * e.page_size;
    p.page_size = std::max(p.page_size, e.page_size);
    if (std::find(p.policies.begin(), p.policies.end(), e.policy) == p.policies.end())
      p.policies.push_back(e.policy);
  }
  return p;
}

uint64_t anon_huge_bytes(std::string_view text, const std::vector<AddressRange>& ranges) {
  uint64_t total = 0;
  bool in = false;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    auto dash = line.find('-');
    auto sp = line.find(' ');
    uint64_t b = 0, e = 0;
    if (dash != std::string_view::npos && sp != std::string_view::npos && dash < sp &&
        parse_u64(line.substr(0, dash), b, 16) &&
        parse_u64(line.substr(dash + 1, sp - dash - 1), e, 16)) {
      in = false;  // a new mapping header
      for (const auto& r : ranges) in = in || (b < r.end && e > r.begin);
      continue;
    }
    if (in && line.substr(0, 14) == "AnonHugePages:") {
      std::string_view v = line.substr(14);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      auto sp2 = v.find(' ');
      uint64_t kb = 0;
      if (parse_u64(v.substr(0, sp2), kb)) total += kb * 1024;
    }
  }
  return total;
}

uint64_t read_self_anon_huge_bytes(const std::vector<AddressRange>& ranges, std::string& err) {
  std::ifstream in("/proc/self/smaps");
  if (!in) {
    err = "unsupported: /proc/self/smaps is not readable";
    return 0;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return anon_huge_bytes(ss.str(), ranges);
}

std::vector<NumaMapsEntry> read_self_numa_maps(std::string& err) {
  std::ifstream in("/proc/self/numa_maps");
  if (!in) {
    err = "unsupported: /proc/self/numa_maps is not readable (kernel without NUMA support?)";
    return {};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return parse_numa_maps(ss.str());
  } catch (const std::exception& e) {
    err = e.what();
    return {};
  }
}

}  // namespace epyctune::engine::runtime
