// A fork/join pool pinned to an explicit CPU list: one thread per CPU, the
// calling thread being worker 0. A token step issues hundreds of parallel
// regions, so dispatch is a generation counter that workers spin on briefly
// before sleeping on a futex; no allocation or lock per region, no OpenMP.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace epyctune::engine::runtime {

class ThreadPool {
 public:
  // One thread per entry of cpus (each pinned with pthread_setaffinity_np when
  // pin is true; a CPU we may not run on throws std::runtime_error naming it).
  // Whichever thread calls run()/parallel_for() acts as worker 0 and is pinned
  // to cpus[0] the first time it does.
  explicit ThreadPool(std::vector<int> cpus, bool pin = true);
  // n unpinned threads (tests, --threads N): cpus() lists the first n allowed CPUs.
  static ThreadPool unpinned(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(cpus_.size()); }
  const std::vector<int>& cpus() const { return cpus_; }
  bool pinned() const { return pin_; }

  // fn(tid) on every worker tid in [0, size()); returns when all have finished.
  // Several threads may share a pool (e.g. a draft and a target model): their
  // regions are serialized. Not re-entrant: fn must not call back into this pool.
  template <class F>
  void run(F&& fn) {
    std::lock_guard lock(dispatch_mu_);
    run_locked(fn);
  }

  // Splits [0, n) into chunks of `grain` (the last may be shorter) handed out
  // dynamically; fn(begin, end, tid). Which thread computes a chunk must never
  // change a result: callers write each output from one chunk only.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (size() == 1 || n <= grain) {
      pin_caller();
      fn(int64_t{0}, n, 0);
      return;
    }
    std::lock_guard lock(dispatch_mu_);
    next_.store(0, std::memory_order_relaxed);
    run_locked([&](int tid) {
      for (;;) {
        int64_t b = next_.fetch_add(grain, std::memory_order_relaxed);
        if (b >= n) break;
        fn(b, b + grain < n ? b + grain : n, tid);
      }
    });
  }

  // Regions dispatched since construction (bench/diagnostics).
  uint64_t regions() const { return generation_.load(std::memory_order_relaxed); }

 private:
  template <class F>
  void run_locked(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch([](void* ctx, int tid) { (*static_cast<Fn*>(ctx))(tid); }, &fn);
  }
  using JobFn = void (*)(void*, int);
  void dispatch(JobFn fn, void* ctx);
  void worker_main(int tid);
  void pin_caller();

  std::vector<int> cpus_;
  bool pin_ = true;
  std::vector<std::thread> threads_;
  std::mutex dispatch_mu_;

  // Written by the dispatcher before bumping generation_ (release), read by workers.
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};  // futex word: a new region
  alignas(64) std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int> pending_{0};    // workers still in the region
  alignas(64) std::atomic<uint32_t> done_{0};  // futex word: region finished
  std::atomic<bool> caller_sleeping_{false};
  alignas(64) std::atomic<int64_t> next_{0};  // parallel_for chunk cursor
  std::atomic<bool> stop_{false};
};

// Spin iterations before a waiting thread sleeps (EPYCTUNE_SPIN overrides;
// 0 = sleep at once, which suits oversubscribed machines).
int spin_iterations();

}  // namespace epyctune::engine::runtime
