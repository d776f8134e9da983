#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "engine/speculative/draft_feed.hpp"

namespace epyctune::engine::speculative {

PipelinedFeed::PipelinedFeed(Drafter& d, int lookahead, std::function<void()> thread_init)
    : d_(d),
      lookahead_(std::max(1, lookahead)),
      run_ahead_(lookahead_),
      thread_init_(std::move(thread_init)) {
  thread_ = std::thread([this] { run(); });
}

PipelinedFeed::~PipelinedFeed() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PipelinedFeed::run() {
  std::unique_lock<std::mutex> lk(mu_);
  if (thread_init_) {
    try {
      thread_init_();
    } catch (...) {
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
  }
  std::vector<int32_t> snapshot;
  for (;;) {
    cv_.wait(lk, [&] {
      return stop_ || (started_ && !paused_ && !exhausted_ &&
                       chain_.size() < static_cast<size_t>(run_ahead_));
    });
    if (stop_) return;
    snapshot = ctx_;
    const uint64_t ep = epoch_;
    busy_ = true;
    lk.unlock();
    // A parallel draft proposes the whole lookahead in one pass; an
    // autoregressive one goes a token at a time so the verifier can take a
    // short chain early.
    const int want = d_.parallel() ? run_ahead_ - static_cast<int>(chain_.size()) : 1;
    std::vector<Proposal> got;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      got = d_.propose(snapshot, want);
    } catch (...) {
      lk.lock();
      busy_ = false;
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    busy_ = false;
    draft_s_ += dt;
    // The verifier may have rewritten the history meanwhile: the proposal
    // continues a context that no longer exists.
    if (ep != epoch_ || ctx_.size() != snapshot.size()) {
      discarded_ += static_cast<int64_t>(got.size());
      cv_.notify_all();  // pause() may wait for the thread to go idle
      continue;
    }
    if (got.empty()) exhausted_ = true;
    for (auto& p : got) {
      ctx_.push_back(p.token);
      chain_.push_back(std::move(p));
    }
    cv_.notify_all();
  }
}

void PipelinedFeed::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

void PipelinedFeed::start(std::span<const int32_t> prompt) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ctx_.assign(prompt.begin(), prompt.end());
    hist_len_ = ctx_.size();
    chain_.clear();
    exhausted_ = false;
    started_ = true;
    ++epoch_;
  }
  cv_.notify_all();
}

std::vector<Proposal> PipelinedFeed::take(std::span<const int32_t> hist, int k) {
  std::unique_lock<std::mutex> lk(mu_);
  if (hist.size() != hist_len_)
    throw std::logic_error("PipelinedFeed::take: history out of step with the drafter");
  const auto t0 = std::chrono::steady_clock::now();
  const size_t want = static_cast<size_t>(std::max(0, std::min(k, lookahead_)));
  if (static_cast<size_t>(run_ahead_) < want) {
    run_ahead_ = static_cast<int>(want);
    cv_.notify_all();
  }
  cv_.wait(lk, [&] { return error_ || exhausted_ || chain_.size() >= want; });
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rethrow_locked();
  const size_t n = std::min(want, chain_.size());
  return {chain_.begin(), chain_.begin() + static_cast<std::ptrdiff_t>(n)};
}

void PipelinedFeed::committed(std::span<const int32_t> hist) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    rethrow_locked();
    if (hist.size() < hist_len_) throw std::logic_error("PipelinedFeed::committed: history shrank");
    const bool still_valid =
        hist.size() <= ctx_.size() && std::equal(hist.begin(), hist.end(), ctx_.begin());
    if (still_valid) {
      chain_.erase(chain_.begin(),
                   chain_.begin() + static_cast<std::ptrdiff_t>(hist.size() - hist_len_));
    } else {
      discarded_ += static_cast<int64_t>(chain_.size());
      chain_.clear();
      ctx_.assign(hist.begin(), hist.end());
      exhausted_ = false;
      ++epoch_;
    }
    hist_len_ = hist.size();
  }
  cv_.notify_all();
}

void PipelinedFeed::pause() {
  std::unique_lock<std::mutex> lk(mu_);
  paused_ = true;
  discarded_ += static_cast<int64_t>(chain_.size());
  chain_.clear();
  ++epoch_;
  cv_.wait(lk, [&] { return !busy_ || error_; });
  rethrow_locked();
}

void PipelinedFeed::resume(std::span<const int32_t> hist) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    rethrow_locked();
    ctx_.assign(hist.begin(), hist.end());
    hist_len_ = ctx_.size();
    chain_.clear();
    exhausted_ = false;
    paused_ = false;
    ++epoch_;
  }
  cv_.notify_all();
}

void PipelinedFeed::limit_lookahead(int n) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    run_ahead_ = std::clamp(n, 0, lookahead_);
  }
  cv_.notify_all();
}

double PipelinedFeed::draft_seconds() const {
  std::lock_guard<std::mutex> lk(mu_);
  return draft_s_;
}

int64_t PipelinedFeed::discarded() const {
  std::lock_guard<std::mutex> lk(mu_);
  return discarded_;
}

}  // namespace epyctune::engine::speculative
