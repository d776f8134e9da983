#include "common/did_you_mean.hpp"

#include <algorithm>

namespace epyctune::common {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment over three rows: the swap looks two rows back.
  std::vector<size_t> back2(b.size() + 1), back1(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) back1[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({back1[j] + 1, row[j - 1] + 1, back1[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], back2[j - 2] + 1);
    }
    std::swap(back2, back1);
    std::swap(back1, row);
  }
  return back1[b.size()];
}

namespace {

// Leading dashes are spelling, not content: "--profle" has six letters.
size_t letters(std::string_view w) {
  size_t dashes = w.find_first_not_of('-');
  return dashes == std::string_view::npos ? 0 : w.size() - dashes;
}

}  // namespace

std::vector<std::string> closest_matches(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::vector<std::string> best;
  if (letters(word) < 2) return best;
  const size_t limit = std::max<size_t>(1, letters(word) / 3);
  size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    if (c == word) continue;
    size_t d = edit_distance(word, c);
    if (d > best_d) continue;
    if (d < best_d) best.clear();
    best_d = d;
    if (std::find(best.begin(), best.end(), c) == best.end()) best.push_back(c);
  }
  if (!best.empty()) return best;
  for (const auto& c : candidates)
    if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) best.push_back(c);
  if (best.size() != 1) best.clear();
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto m = closest_matches(word, candidates);
  if (m.empty()) return "";
  std::string out = "did you mean '" + m[0] + "'";
  for (size_t i = 1; i < m.size() && i < 3; ++i)
    out += (i + 1 == m.size() || i == 2 ? " or '" : ", '") + m[i] + "'";
  return out + "?";
}

}  // namespace epyctune::common
