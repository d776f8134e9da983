// Human text output in columns: every column as wide as its widest cell, two
// spaces between columns, the last column not padded; colour on request
// (only ever for a terminal: colour_for decides). Tables of knobs, checks and
// instances use it, so `[skip]bios` cannot happen.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epyctune::common {

// What a cell means, mapped to one ANSI colour each.
enum class Tone { plain, good, change, warn, bad, dim, heading };

// Whether to colour what goes to `fd`: a terminal, NO_COLOR unset or empty
// (no-color.org), TERM not "dumb".
bool colour_for(int fd);

// `text` wrapped in the tone's ANSI codes when `colour`, else unchanged.
std::string paint(std::string_view text, Tone tone, bool colour);

// Columns count what a terminal shows: UTF-8 code points, not bytes.
size_t display_width(std::string_view s);

struct Cell {
  std::string text;
  Tone tone = Tone::plain;
  Cell(std::string t = {}, Tone tn = Tone::plain) : text(std::move(t)), tone(tn) {}
  Cell(const char* t, Tone tn = Tone::plain) : text(t), tone(tn) {}
};

class TextTable {
 public:
  explicit TextTable(std::string indent = "") : indent_(std::move(indent)) {}
  void row(std::vector<Cell> cells) { rows_.push_back({std::move(cells), {}}); }
  // A line of its own between rows (a step's title): no columns, no width.
  void line(std::string text, Tone tone = Tone::plain) {
    rows_.push_back({{}, Cell(std::move(text), tone)});
  }
  bool empty() const { return rows_.empty(); }
  std::string render(bool colour) const;

 private:
  struct Row {
    std::vector<Cell> cells;
    Cell line;  // used when cells is empty
  };
  std::string indent_;
  std::vector<Row> rows_;
};

}  // namespace epyctune::common
