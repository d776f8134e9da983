#include "engine/runtime/thread_pool.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/runtime/cpus.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EPYCTUNE_PAUSE() _mm_pause()
#else
#define EPYCTUNE_PAUSE() ((void)0)
#endif

namespace epyctune::engine::runtime {
namespace {

void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

void pin_to(pthread_t th, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(th, sizeof(set), &set);
  if (rc != 0)
    throw std::runtime_error("thread pool: cannot pin a thread to CPU " + std::to_string(cpu) +
                             ": " + std::strerror(rc));
}

// The CPU the current thread last pinned itself to as some pool's worker 0
// (one thread driving two pools that start on different CPUs moves each time).
thread_local int t_pinned_cpu = -1;

}  // namespace

int spin_iterations() {
  static const int n = [] {
    const char* e = std::getenv("EPYCTUNE_SPIN");
    if (e && *e) return std::max(0, std::atoi(e));
    return 4000;
  }();
  return n;
}

ThreadPool::ThreadPool(std::vector<int> cpus, bool pin) : ThreadPool(std::move(cpus), pin, {}) {}

ThreadPool::ThreadPool(std::vector<int> cpus, bool pin, WorkerStartHook on_worker_start)
    : cpus_(std::move(cpus)), pin_(pin), on_start_(std::move(on_worker_start)) {
  if (cpus_.empty()) throw std::invalid_argument("thread pool: empty CPU list");
  if (pin_) {
    auto allowed = allowed_cpus();
    for (int c : cpus_) {
      bool ok = false;
      for (int a : allowed) ok = ok || a == c;
      if (!ok)
        throw std::invalid_argument("thread pool: CPU " + std::to_string(c) +
                                    " is not one this process may run on");
    }
  }
  ranges_ = std::make_unique<StreamRange[]>(cpus_.size());
  threads_.reserve(cpus_.size() - 1);
  try {
    for (size_t i = 1; i < cpus_.size(); ++i) {
      threads_.emplace_back([this, i] { worker_main(static_cast<int>(i)); });
      if (pin_) pin_to(threads_.back().native_handle(), cpus_[i]);
    }
    workers_pinned_.store(true, std::memory_order_release);
    // The hooks have run (each after its thread was pinned) when we return.
    while (workers_started_.load(std::memory_order_acquire) < static_cast<int>(threads_.size()))
      std::this_thread::yield();
  } catch (...) {
    stop_.store(true);
    workers_pinned_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    futex_wake_all(&generation_);
    for (auto& t : threads_) t.join();
    throw;
  }
}

ThreadPool ThreadPool::unpinned(int n_threads) {
  return ThreadPool(first_cpus(n_threads), false);
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&generation_);
  for (auto& t : threads_) t.join();
}

void ThreadPool::pin_caller() {
  if (!pin_ || t_pinned_cpu == cpus_[0]) return;
  pin_to(pthread_self(), cpus_[0]);
  t_pinned_cpu = cpus_[0];
}

void ThreadPool::dispatch(JobFn fn, void* ctx) {
  if (threads_.empty()) {
    pin_caller();
    fn(ctx, 0);
    return;
  }
  pin_caller();
  job_fn_ = fn;
  job_ctx_ = ctx;
  pending_.store(static_cast<int>(threads_.size()), std::memory_order_relaxed);
  uint32_t gen = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation_);

  fn(ctx, 0);

  // Wait for the workers: spin, then sleep on done_ (the last worker wakes us).
  int spins = spin_iterations();
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < spins) {
      EPYCTUNE_PAUSE();
      continue;
    }
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    // Sleep only on the value seen before re-checking, so a finish between the
    // check and the syscall makes FUTEX_WAIT return at once.
    uint32_t d = done_.load(std::memory_order_seq_cst);
    if (d != gen && pending_.load(std::memory_order_seq_cst) != 0) futex_wait(&done_, d);
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
}

void ThreadPool::worker_main(int tid) {
  while (!workers_pinned_.load(std::memory_order_acquire)) std::this_thread::yield();
  if (on_start_ && !stop_.load(std::memory_order_relaxed)) on_start_(tid, cpus_[tid]);
  workers_started_.fetch_add(1, std::memory_order_release);
  uint32_t seen = 0;
  const int spins = spin_iterations();
  for (;;) {
    uint32_t gen;
    int i = 0;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      if (i++ < spins) {
        EPYCTUNE_PAUSE();
        continue;
      }
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(&generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = gen;
    if (stop_.load(std::memory_order_relaxed)) return;
    job_fn_(job_ctx_, tid);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      done_.store(gen, std::memory_order_release);
      if (caller_sleeping_.load(std::memory_order_seq_cst)) futex_wake_all(&done_);
    }
  }
}

}  // namespace epyctune::engine::runtime
