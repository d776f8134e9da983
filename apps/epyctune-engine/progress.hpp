// A one-line progress display on stderr, redrawn in place with '\r'. Drawn
// only when stderr is a terminal: logs, pipes and JSON consumers see nothing.
// The library reports progress through callbacks; this is where the app
// decides whether and how to show it.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace epyctune::engine_cli {

class ProgressLine {
 public:
  explicit ProgressLine(std::string label)
      : ProgressLine(std::move(label), ::isatty(STDERR_FILENO) == 1) {}
  ProgressLine(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { finish(); }

  bool enabled() const { return enabled_; }

  // "[label] what 42% (done/total unit)". Redraws at most ten times a second,
  // and always when done reaches total.
  void update(std::string_view what, uint64_t done, uint64_t total, std::string_view unit = "") {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double pct = total ? 100.0 * double(done) / double(total) : 100.0;
    std::fprintf(stderr, "\r[%s] %.*s %3.0f%% (%llu/%llu%s%.*s)\x1b[K", label_.c_str(),
                 static_cast<int>(what.size()), what.data(), pct,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 unit.empty() ? "" : " ", static_cast<int>(unit.size()), unit.data());
    std::fflush(stderr);
  }

  // Erases the line, so the next message starts on a clean one.
  void finish() {
    if (!drawn_) return;
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point last_{};
};

}  // namespace epyctune::engine_cli
