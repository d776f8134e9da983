#include "common/cpulist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "common/text.hpp"

namespace epyctune::common {

namespace {
// A hostile list can be megabytes long: messages quote only its start.
std::string shorten(std::string_view s) {
  constexpr size_t kMax = 64;
  return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "...";
}

int parse_int(std::string_view s, std::string_view whole) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    throw std::invalid_argument(
        fmt::format("bad CPU list '{}': '{}' is not a CPU number", shorten(whole), shorten(s)));
  return v;
}

void check_limit(int cpu, int limit, std::string_view whole) {
  if (cpu >= limit)
    throw std::invalid_argument(
        fmt::format("bad CPU list '{}': CPU {} is out of range (CPU ids go up to {})",
                    shorten(whole), cpu, limit - 1));
}
}  // namespace

std::vector<int> parse_cpulist(std::string_view text, int cpu_limit) {
  std::vector<int> out;
  std::string_view all = trim_view(text);
  std::string_view rest = all;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view tok = trim_view(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (tok.empty())
      throw std::invalid_argument(fmt::format("bad CPU list '{}': empty item", shorten(all)));
    auto dash = tok.find('-');
    if (dash == std::string_view::npos) {
      int v = parse_int(tok, all);
      check_limit(v, cpu_limit, all);
      out.push_back(v);
    } else {
      int a = parse_int(trim_view(tok.substr(0, dash)), all);
      int b = parse_int(trim_view(tok.substr(dash + 1)), all);
      if (b < a)
        throw std::invalid_argument(
            fmt::format("bad CPU list '{}': range {} is reversed", shorten(all), shorten(tok)));
      check_limit(b, cpu_limit, all);
      for (int i = a; i <= b; ++i) out.push_back(i);
      // Overlapping ranges could still pile up duplicates: keep at most one
      // copy of every allowed id.
      if (out.size() > 2 * static_cast<size_t>(cpu_limit)) {
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpulist(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpumask(std::string_view hex_in, int cpu_limit) {
  std::string hex;
  for (char c : trim_view(hex_in))
    if (c != ',') hex += c;
  // Leading zero digits name no CPU; any other digit past the limit does.
  size_t first = hex.find_first_not_of('0');
  hex.erase(0, first == std::string::npos ? hex.size() : first);
  if (!hex.empty() && (hex.size() - 1) * 4 >= static_cast<size_t>(cpu_limit))
    throw std::invalid_argument(
        fmt::format("bad CPU mask '{}': it names CPUs beyond {}", shorten(hex_in), cpu_limit - 1));
  std::vector<int> out;
  int bit = 0;
  for (auto it = hex.rbegin(); it != hex.rend(); ++it, bit += 4) {
    char c = *it;
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      throw std::invalid_argument(
          fmt::format("bad CPU mask '{}': '{}' is not hex", shorten(hex_in), c));
    for (int k = 0; k < 4; ++k)
      if (v & (1 << k)) {
        if (bit + k >= cpu_limit)
          throw std::invalid_argument(fmt::format("bad CPU mask '{}': it names CPUs beyond {}",
                                                  shorten(hex_in), cpu_limit - 1));
        out.push_back(bit + k);
      }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string format_cpumask(const std::vector<int>& cpus) {
  int max = cpus.empty() ? 0 : *std::max_element(cpus.begin(), cpus.end());
  int words = max / 32 + 1;
  std::vector<uint32_t> w(static_cast<size_t>(words), 0);
  for (int c : cpus) w[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  for (int i = words - 1; i >= 0; --i) {
    if (!out.empty()) out += ',';
    out += fmt::format("{:08x}", w[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace epyctune::common
