#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"

using namespace epyctune::engine::runtime;

TEST_CASE("parallel_for covers every index exactly once, many regions in a row") {
  for (int nt : {1, 2, 3}) {
    auto pool = ThreadPool::unpinned(nt);
    CHECK(pool.size() == nt);
    std::vector<std::atomic<int>> hits(1000);
    for (int rep = 0; rep < 300; ++rep) {
      int64_t n = 1 + (rep * 37) % 1000;
      pool.parallel_for(n, 1 + rep % 17, [&](int64_t b, int64_t e, int tid) {
        CHECK_UNARY(tid >= 0);
        CHECK_UNARY(tid < nt);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < 1000; ++i) {
        int expect = i < n ? 1 : 0;
        if (hits[i].load() != expect) FAIL("index " << i << " hit " << hits[i].load());
        hits[i].store(0);
      }
    }
  }
}

TEST_CASE("parallel_stream covers every index exactly once, in grain-aligned chunks") {
  for (int nt : {1, 2, 3}) {
    auto pool = ThreadPool::unpinned(nt);
    std::vector<std::atomic<int>> hits(1000);
    for (int rep = 0; rep < 300; ++rep) {
      const int64_t n = 1 + (rep * 37) % 1000, grain = 1 + rep % 17;
      pool.parallel_stream(n, grain, [&](int64_t b, int64_t e, int tid) {
        CHECK_UNARY(tid >= 0);
        CHECK_UNARY(tid < nt);
        // One thread streams the whole range in one call.
        CHECK_UNARY(b % grain == 0);
        CHECK_UNARY(e == (nt == 1 ? n : std::min(b + grain, n)));
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < 1000; ++i) {
        int expect = i < n ? 1 : 0;
        if (hits[i].load() != expect) FAIL("index " << i << " hit " << hits[i].load());
        hits[i].store(0);
      }
    }
  }
}

TEST_CASE("parallel_stream: each thread starts at the front of its own range; an idle one steals") {
  auto pool = ThreadPool::unpinned(2);
  // Thread 0 is held until thread 1 has finished its half and, if it
  // steals, taken chunks from the back of thread 0's.
  std::atomic<int> t1_done{0};
  std::vector<int> owner(8, -1);
  std::vector<int64_t> first(2, -1);
  pool.parallel_stream(8, 1, [&](int64_t b, int64_t, int tid) {
    if (first[tid] < 0) first[tid] = b;
    // Bounded, so a pool that never steals fails the checks instead of hanging.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    if (tid == 0)
      while (t1_done.load() < 6 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    owner[b] = tid;
    if (tid == 1) t1_done.fetch_add(1);
  });
  CHECK(first[0] == 0);
  CHECK(first[1] == 4);
  // Thread 1 did its own four in order, then took chunks 3 and 2 from the
  // back of thread 0's range while thread 0 still held chunk 0.
  CHECK(owner[0] == 0);
  for (int c : {2, 3, 4, 5, 6, 7}) CHECK_MESSAGE(owner[c] == 1, "chunk ", c);
}

TEST_CASE("run gives each worker its own tid once") {
  auto pool = ThreadPool::unpinned(3);
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<std::atomic<int>> seen(3);
    pool.run([&](int tid) { seen[tid].fetch_add(1); });
    for (auto& s : seen) CHECK(s.load() == 1);
  }
}

TEST_CASE("workers that went to sleep wake up for the next region") {
  auto pool = ThreadPool::unpinned(2);
  std::atomic<int> sum{0};
  for (int rep = 0; rep < 5; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the spin phase
    pool.run([&](int tid) { sum.fetch_add(tid + 1); });
  }
  CHECK(sum.load() == 5 * 3);
}

TEST_CASE("a pool may be driven from another thread than the one that built it") {
  auto pool = ThreadPool::unpinned(2);
  std::atomic<int64_t> total{0};
  std::thread t([&] {
    pool.parallel_for(100, 3, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) total += i;
    });
  });
  t.join();
  CHECK(total.load() == 4950);
}

TEST_CASE("pinned pool on allowed CPUs; a CPU we may not use is refused by name") {
  auto allowed = allowed_cpus();
  REQUIRE(!allowed.empty());
  {
    ThreadPool pool({allowed[0]}, true);
    int x = 0;
    pool.parallel_for(10, 1, [&](int64_t b, int64_t e, int) { x += int(e - b); });
    CHECK(x == 10);
  }
  CHECK_THROWS_WITH_AS(ThreadPool({100000}, true), doctest::Contains("CPU 100000"),
                       std::invalid_argument);
  CHECK_THROWS_AS(parse_cpus("99999"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpus("a-b"), std::invalid_argument);
  CHECK(parse_cpus(std::to_string(allowed[0])) == std::vector<int>{allowed[0]});
  CHECK(first_cpus(1).size() == 1);
}

TEST_CASE("two threads sharing one pool get their regions serialized, each complete") {
  auto pool = ThreadPool::unpinned(2);
  std::atomic<int64_t> a{0}, b{0};
  auto work = [&](std::atomic<int64_t>& sum) {
    for (int rep = 0; rep < 200; ++rep)
      pool.parallel_for(64, 4, [&](int64_t lo, int64_t hi, int) {
        for (int64_t i = lo; i < hi; ++i) sum += i;
      });
  };
  std::thread t1([&] { work(a); });
  std::thread t2([&] { work(b); });
  t1.join();
  t2.join();
  CHECK(a.load() == 200 * 2016);
  CHECK(b.load() == 200 * 2016);
}

TEST_CASE("the worker start hook runs on every worker after it is pinned") {
  const auto allowed = epyctune::engine::runtime::allowed_cpus();
  std::vector<int> cpus{allowed.front(), allowed.back(), allowed.front()};
  std::mutex mu;
  std::vector<std::pair<int, int>> seen;
  std::vector<bool> on_cpu;
  epyctune::engine::runtime::ThreadPool pool(cpus, true, [&](int tid, int cpu) {
    std::lock_guard lk(mu);
    seen.emplace_back(tid, cpu);
    on_cpu.push_back(sched_getcpu() == cpu);
  });
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::pair<int, int>>{{1, cpus[1]}, {2, cpus[2]}});
  for (bool b : on_cpu) CHECK(b);
}
