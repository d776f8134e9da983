#include "stack/text_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "common/cpulist.hpp"
#include "stack/confine.hpp"

namespace epyctune::stack {

std::string one_line(std::string_view value, size_t max) {
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
  size_t lines = static_cast<size_t>(std::count(value.begin(), value.end(), '\n')) + 1;
  std::string_view first = value.substr(0, value.find('\n'));
  std::string out;
  for (char c : first) {
    if (c == '\t')
      out += ' ';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  std::string more = lines > 1 ? fmt::format(" (+{} lines)", lines - 1) : "";
  if (out.size() + more.size() > max) {
    size_t keep = max > more.size() + 3 ? max - more.size() - 3 : 0;
    out.resize(keep);
    out.append("...");
  }
  return out + more;
}

namespace {

// A name cut at its digit runs: "cpu12 governor" -> text {"cpu", " governor"},
// numbers {12}. Runs too long for an int stay text.
struct Split {
  std::vector<std::string> text;  // one more than numbers
  std::vector<int> numbers;
  std::string pattern() const {
    std::string p;
    for (size_t i = 0; i < text.size(); ++i) p += (i ? "\x01" : "") + text[i];
    return p;
  }
};

Split split_numbers(const std::string& name) {
  Split s;
  s.text.emplace_back();
  for (size_t i = 0; i < name.size();) {
    size_t j = i;
    while (j < name.size() && name[j] >= '0' && name[j] <= '9') ++j;
    if (j > i && j - i <= 6) {
      s.numbers.push_back(std::stoi(name.substr(i, j - i)));
      s.text.emplace_back();
      i = j;
    } else {
      s.text.back() += name.substr(i, std::max<size_t>(j - i, 1));
      i = std::max(j, i + 1);
    }
  }
  return s;
}

// "cpu" + list -> "CPUs 2-127"; "IRQ " + list -> "IRQs 0,4"; else as is.
std::string name_with_list(const Split& s, size_t at, const std::vector<int>& list) {
  std::string before = s.text[at];
  std::string cpus = common::format_cpulist(list);
  if (before.size() >= 3 && before.compare(before.size() - 3, 3, "cpu") == 0) {
    before.resize(before.size() - 3);
    before.append("CPUs ");
  } else if (before.size() >= 2 && before.back() == ' ' &&
             std::isalpha(static_cast<unsigned char>(before[before.size() - 2]))) {
    before.back() = 's';  // "IRQ " -> "IRQs "
    before.push_back(' ');
  }
  std::string out;
  for (size_t i = 0; i < s.text.size(); ++i) {
    out += i == at ? before : s.text[i];
    if (i < s.numbers.size()) out += i == at ? cpus : std::to_string(s.numbers[i]);
  }
  return out;
}

// The one number position where the group's names differ, or nullopt.
std::optional<size_t> varying_position(const std::vector<Split>& splits,
                                       const std::vector<size_t>& group) {
  std::optional<size_t> at;
  const auto& first = splits[group.front()].numbers;
  for (size_t k = 0; k < first.size(); ++k)
    for (size_t m : group)
      if (splits[m].numbers[k] != first[k]) {
        if (at && *at != k) return std::nullopt;
        at = k;
        break;
      }
  return at;
}

}  // namespace

std::vector<FoldedRow> fold_rows(const std::vector<FoldInput>& rows, bool fold) {
  std::vector<FoldedRow> out;
  if (!fold) {
    for (size_t i = 0; i < rows.size(); ++i) out.push_back({rows[i].name, {i}});
    return out;
  }
  std::vector<Split> splits;
  std::map<std::string, std::vector<size_t>> groups;
  std::vector<std::string> key_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    splits.push_back(split_numbers(rows[i].name));
    key_of.push_back(splits.back().pattern() + '\x02' + rows[i].shown);
    groups[key_of.back()].push_back(i);
  }
  std::vector<bool> done(rows.size(), false);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (done[i]) continue;
    const auto& group = groups[key_of[i]];
    auto at = group.size() > 1 ? varying_position(splits, group) : std::nullopt;
    if (!at) {
      out.push_back({rows[i].name, {i}});
      done[i] = true;
      continue;
    }
    std::vector<int> list;
    for (size_t m : group) {
      list.push_back(splits[m].numbers[*at]);
      done[m] = true;
    }
    std::sort(list.begin(), list.end());
    out.push_back({name_with_list(splits[i], *at, list), group});
  }
  return out;
}

bool is_grub_dropin(std::string_view path) {
  std::string_view dir = kGrubDropinDir;
  return path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/';
}

std::string boot_next_step(bool grub_changed, bool reboot, const std::string& why) {
  if (!grub_changed && !reboot) return "";
  return fmt::format("Next: {}{}\n", grub_changed ? "run update-grub, then reboot" : "reboot",
                     why.empty() ? "" : " (" + why + ")");
}

}  // namespace epyctune::stack
