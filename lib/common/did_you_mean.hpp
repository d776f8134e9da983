// "Did you mean": the known words closest to a mistyped one, for the usage
// errors of every binary (a subcommand, an option, a format name). One copy,
// so `epyctune aply`, `epyctune-engine generate --tokns` and `epyctuned
// --conifg` all answer the same way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epyctune::common {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidates a typo of `word` could have meant, best first: the nearest
// within a third of the word's length (at least one edit), or else the one
// candidate the word is a prefix of. Empty when nothing is close, so an
// unrelated word gets no misleading guess.
std::vector<std::string> closest_matches(std::string_view word,
                                         const std::vector<std::string>& candidates);

// "did you mean 'apply'?", "did you mean 'plan' or 'run'?", or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace epyctune::common
