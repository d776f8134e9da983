// A fork/join pool pinned to an explicit CPU list: one thread per CPU, the
// calling thread being worker 0. A token step issues hundreds of parallel
// regions, so dispatch is a generation counter that workers spin on briefly
// before sleeping on a futex; no allocation or lock per region, no OpenMP.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
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
  // Runs on each worker thread 1..size()-1 once, after it is pinned, before
  // the constructor returns (worker 0 is whichever thread calls run(), so its
  // caller handles it): where threads join a resctrl group and read back
  // where they landed. Must not throw.
  using WorkerStartHook = std::function<void(int tid, int cpu)>;
  ThreadPool(std::vector<int> cpus, bool pin, WorkerStartHook on_worker_start);
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
    if (without_region(n, grain, fn)) return;
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

  // Splits [0, n) into size() contiguous ranges, one per thread, each taken
  // in chunks of `grain` from its front by its owner; a thread whose range is
  // done takes chunks from the back of the fullest other range. Each thread
  // so streams one ascending run of memory (the prefetchers stay ahead, as
  // in one big call), while the threads still finish within about a chunk of
  // each other: with halves fixed up front, the faster of two unevenly
  // loaded cores (a VM's steal) would sit idle at the end. fn(begin, end, tid); as
  // with parallel_for, which thread computes a chunk must never change a result.
  template <class F>
  void parallel_stream(int64_t n, int64_t grain, F&& fn) {
    if (without_region(n, grain, fn)) return;
    const int64_t chunks = (n + grain - 1) / grain;
    if (chunks > int64_t{UINT32_MAX})
      throw std::invalid_argument("parallel_stream: too many chunks");
    std::lock_guard lock(dispatch_mu_);
    const int nt = size();
    for (int i = 0; i < nt; ++i)
      ranges_[i].v.store(StreamRange::pack(chunks * i / nt, chunks * (i + 1) / nt),
                         std::memory_order_relaxed);
    run_locked([&](int tid) {
      auto run_chunk = [&](int64_t c) { fn(c * grain, c + 1 < chunks ? (c + 1) * grain : n, tid); };
      for (int64_t c; (c = ranges_[tid].take_front()) >= 0;) run_chunk(c);
      for (;;) {
        int victim = -1;
        int64_t most = 0;
        for (int i = 0; i < nt; ++i) {
          const int64_t left = ranges_[i].left();
          if (left > most) most = left, victim = i;
        }
        if (victim < 0) break;
        const int64_t c = ranges_[victim].take_back();
        if (c >= 0) run_chunk(c);
      }
    });
  }

  // Regions dispatched since construction (bench/diagnostics).
  uint64_t regions() const { return generation_.load(std::memory_order_relaxed); }

 private:
  // The loops that need no region: nothing to do, or one thread or one
  // chunk, which the caller runs itself. Clamps grain to >= 1.
  template <class F>
  bool without_region(int64_t n, int64_t& grain, F& fn) {
    if (n <= 0) return true;
    if (grain < 1) grain = 1;
    if (size() > 1 && n > grain) return false;
    pin_caller();
    fn(int64_t{0}, n, 0);
    return true;
  }
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
  WorkerStartHook on_start_;
  std::atomic<bool> workers_pinned_{false};
  std::atomic<int> workers_started_{0};

  // Written by the dispatcher before bumping generation_ (release), read by workers.
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};  // futex word: a new region
  alignas(64) std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int> pending_{0};    // workers still in the region
  alignas(64) std::atomic<uint32_t> done_{0};  // futex word: region finished
  std::atomic<bool> caller_sleeping_{false};
  alignas(64) std::atomic<int64_t> next_{0};  // parallel_for chunk cursor
  // parallel_stream: chunks [front, back) of one thread's range, packed in
  // one word so the owner (front) and a thief (back) cannot take the same one.
  struct alignas(64) StreamRange {
    std::atomic<uint64_t> v{0};
    static uint64_t pack(int64_t front, int64_t back) {
      return static_cast<uint64_t>(front) | static_cast<uint64_t>(back) << 32;
    }
    static int64_t front(uint64_t x) { return static_cast<int64_t>(x & 0xffffffffu); }
    static int64_t back(uint64_t x) { return static_cast<int64_t>(x >> 32); }
    int64_t left() const {
      const uint64_t x = v.load(std::memory_order_relaxed);
      return back(x) - front(x);
    }
    int64_t take_front() {
      uint64_t x = v.load(std::memory_order_relaxed);
      while (front(x) < back(x))
        if (v.compare_exchange_weak(x, pack(front(x) + 1, back(x)), std::memory_order_relaxed))
          return front(x);
      return -1;
    }
    int64_t take_back() {
      uint64_t x = v.load(std::memory_order_relaxed);
      while (front(x) < back(x))
        if (v.compare_exchange_weak(x, pack(front(x), back(x) - 1), std::memory_order_relaxed))
          return back(x) - 1;
      return -1;
    }
  };
  std::unique_ptr<StreamRange[]> ranges_;
  std::atomic<bool> stop_{false};
};

// Spin iterations before a waiting thread sleeps (EPYCTUNE_SPIN overrides;
// 0 = sleep at once, which suits oversubscribed machines).
int spin_iterations();

}  // namespace epyctune::engine::runtime
