// Generated text on its way to a client: stop strings cut it (the stop and
// what follows are never sent), and a streamed delta never ends inside a
// possible stop string or inside a UTF-8 character, so the concatenated
// deltas are exactly the non-streamed text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epyctune::engine::serving {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stops = {});
  // Adds a token's bytes; returns the text now safe to send. When a stop
  // string completes, returns the text before it and stopped() turns true.
  std::string push(std::string_view piece);
  // At the end of generation: what was held back (nothing after a stop).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

// Bytes at the end of s that begin a UTF-8 character not yet complete (0-3).
size_t incomplete_utf8_tail(std::string_view s);

}  // namespace epyctune::engine::serving
