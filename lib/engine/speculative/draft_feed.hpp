// Where the verifier gets its drafts from. Two schedules over one Drafter:
//  - SharedFeed: drafts on the calling thread right before each verify
//    (time-shared: draft and target alternate on the same CPUs).
//  - PipelinedFeed: a dedicated drafting thread (pinned to the draft
//    partition) that keeps extending the chain while the target verifies,
//    assuming full acceptance; a mismatch discards the chain and it restarts
//    from the corrected token.
// Both hand out the same tokens for the same history (see drafter.hpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/speculative/drafter.hpp"

namespace epyctune::engine::speculative {

class DraftFeed {
 public:
  virtual ~DraftFeed() = default;
  // Processes the prompt on the draft side (may return before it is done).
  virtual void start(std::span<const int32_t> prompt) = 0;
  // Up to k proposals continuing hist (fewer only when no source has one).
  virtual std::vector<Proposal> take(std::span<const int32_t> hist, int k) = 0;
  // hist has grown to its new length after a verify.
  virtual void committed(std::span<const int32_t> hist) = 0;
  virtual double draft_seconds() const = 0;  // time spent computing proposals
  virtual double wait_seconds() const = 0;   // time the verifier waited on them
  virtual int64_t discarded() const = 0;     // proposals computed but thrown away
};

class SharedFeed final : public DraftFeed {
 public:
  explicit SharedFeed(Drafter& d) : d_(d) {}
  void start(std::span<const int32_t> prompt) override;
  std::vector<Proposal> take(std::span<const int32_t> hist, int k) override;
  void committed(std::span<const int32_t>) override {}
  double draft_seconds() const override { return draft_s_; }
  double wait_seconds() const override { return draft_s_; }
  int64_t discarded() const override { return 0; }

 private:
  Drafter& d_;
  double draft_s_ = 0.0;
};

class PipelinedFeed final : public DraftFeed {
 public:
  // lookahead: how many proposals the thread may run ahead of the history.
  // thread_init runs first on the drafting thread (CPU pinning, NUMA policy).
  PipelinedFeed(Drafter& d, int lookahead, std::function<void()> thread_init);
  ~PipelinedFeed() override;
  void start(std::span<const int32_t> prompt) override;
  std::vector<Proposal> take(std::span<const int32_t> hist, int k) override;
  void committed(std::span<const int32_t> hist) override;
  double draft_seconds() const override;
  double wait_seconds() const override { return wait_s_; }
  int64_t discarded() const override;
  // Stops running ahead and returns once the drafting thread is idle: the
  // draft's CPUs go to the target, and the Drafter may be used from the
  // calling thread until resume(). The chain is discarded.
  void pause();
  // Runs ahead again from hist (the Drafter may have moved meanwhile).
  void resume(std::span<const int32_t> hist);
  // How far ahead to run from now on (at most the constructor's; 0: idle
  // until a take() asks): with a short K chosen, proposals far ahead would
  // only be thrown away, and each costs memory bandwidth the target shares.
  void limit_lookahead(int n);

 private:
  void run();
  void rethrow_locked();

  Drafter& d_;
  int lookahead_;  // the most, for take()
  int run_ahead_;  // how far the thread goes now (<= lookahead_)
  std::function<void()> thread_init_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // ctx_ = committed history followed by the chain of proposals; chain_
  // holds the proposals for ctx_[hist_len_ ..].
  std::vector<int32_t> ctx_;
  size_t hist_len_ = 0;
  std::vector<Proposal> chain_;
  uint64_t epoch_ = 0;      // bumped when the chain is discarded
  bool exhausted_ = false;  // the drafter had nothing for the current ctx_
  bool stop_ = false;
  bool started_ = false;
  bool paused_ = false;
  bool busy_ = false;  // the thread is inside the Drafter
  std::exception_ptr error_;
  double draft_s_ = 0.0;
  double wait_s_ = 0.0;
  int64_t discarded_ = 0;
};

}  // namespace epyctune::engine::speculative
