// The journal's format and failure modes, and the one-writer lock.
#include <doctest/doctest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "../fixture/fixture_cache.hpp"
#include "stack/apply.hpp"
#include "stack/journal.hpp"
#include "stack/revert.hpp"
#include "stack/state_lock.hpp"
#include "stack/steps.hpp"
#include "stack_test_util.hpp"

using namespace epyctune;
using namespace epyctune::stack;
namespace fs = std::filesystem;

namespace {

using testing::put;

std::vector<Knob> one_knob() {
  return {value_knob("numa", "numa_balancing", "/proc/sys/kernel/numa_balancing", Canon::Int, "0")};
}

}  // namespace

TEST_CASE("journal: header, entries, torn tail past the seal ignored, malformed record named") {
  testing::ScratchDir d;
  put(d.path(), "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  auto r = apply_knobs(sys, one_knob(), {});
  REQUIRE(r.exit_code == kExitOk);
  Journal j(sys);
  auto c = j.load();
  CHECK(c.exists);
  REQUIRE(c.entries.size() == 1);
  CHECK(c.entries[0].line == 3);  // after the seal and the header
  CHECK(c.entries[0].original.raw == "1\n");
  CHECK(c.created_dirs == std::vector<std::string>{"/var", "/var/lib", "/var/lib/epyctune"});

  SUBCASE("a torn record past the seal (crash inside the append) is ignored") {
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app) << "{\"type\":\"orig";
    auto c2 = j.load();
    CHECK(c2.entries.size() == 1);
    CHECK(!c2.torn_tail.empty());
  }
  SUBCASE("a checksummed record that is not JSON stops apply and revert, naming the line") {
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app)
        << journal_record("{not json}");
    try {
      j.load();
      FAIL("expected JournalError");
    } catch (const JournalError& e) {
      CHECK(e.line() == 4);
      CHECK(std::string(e.what()).find("line 4") != std::string::npos);
      CHECK(std::string(e.what()).find("journal") != std::string::npos);
    }
    auto knobs = one_knob();
    knobs[0].desired = "1";
    CHECK_THROWS_AS(apply_knobs(sys, knobs, {}), JournalError);
    CHECK_THROWS_AS(revert_journal(sys), JournalError);
    // Nothing was restored or written while the journal was unreadable.
    std::ifstream in(d.path() / "proc/sys/kernel/numa_balancing");
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "0\n");
  }
  SUBCASE("a record missing a field is named too") {
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app) << journal_record(
        "{\"type\":\"original\",\"step\":\"x\",\"name\":\"y\",\"knob\":{\"kind\":\"value\"}}");
    CHECK_THROWS_WITH_AS(j.load(), doctest::Contains("line 4: missing field 'path'"), JournalError);
  }
  SUBCASE("a number too large for a double is named as bad JSON, not a crash") {
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app)
        << journal_record("{\"type\":\"original\",\"v\":2444e444444}");
    CHECK_THROWS_WITH_AS(j.load(), doctest::Contains("not valid JSON"), JournalError);
  }
  SUBCASE("revert clears the journal and the state dirs it created") {
    auto rv = revert_journal(sys);
    CHECK(rv.exit_code == kExitOk);
    CHECK(!fs::exists(d.path() / "var"));
  }
}

TEST_CASE("lock: a stale lock is recovered, a live one reported with its pid") {
  testing::ScratchDir d;
  put(d.path(), "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  ensure_state_dir(sys);

  SUBCASE("stale: the pid in the file is dead and holds no flock") {
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, nullptr, 0);
    put(d.path(), "var/lib/epyctune/lock", std::to_string(dead) + "\n");
    auto r = apply_knobs(sys, one_knob(), {});
    CHECK(r.exit_code == kExitOk);
    REQUIRE(r.notes.size() == 1);
    CHECK(r.notes[0].find("stale lock left by pid " + std::to_string(dead)) != std::string::npos);
  }
  SUBCASE("live: another process holds it") {
    int ready[2], release[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(pipe(release) == 0);
    pid_t holder = fork();
    if (holder == 0) {
      StateLock lock(sys);
      char c = 'x';
      (void)!write(ready[1], &c, 1);
      (void)!read(release[0], &c, 1);
      _exit(0);
    }
    char c;
    REQUIRE(read(ready[0], &c, 1) == 1);
    auto r = apply_knobs(sys, one_knob(), {});
    CHECK(r.exit_code == kExitLocked);
    CHECK(r.error.find("pid " + std::to_string(holder)) != std::string::npos);
    CHECK(revert_journal(sys).exit_code == kExitOk);  // no journal yet: nothing to lock for
    (void)!write(release[1], &c, 1);
    waitpid(holder, nullptr, 0);
    for (int fd : {ready[0], ready[1], release[0], release[1]}) close(fd);
    // Nothing was written while locked out.
    std::ifstream in(d.path() / "proc/sys/kernel/numa_balancing");
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "1\n");
  }
}

TEST_CASE("lock: a clean apply in another process leaves no lock and no stale-lock note") {
  testing::ScratchDir d;
  put(d.path(), "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  pid_t child = fork();
  if (child == 0) _exit(apply_knobs(sys, one_knob(), {}).exit_code);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == kExitOk);
  CHECK(!fs::exists(d.path() / "var/lib/epyctune/lock"));
  auto r = revert_journal(sys);
  CHECK(r.exit_code == kExitOk);
  for (const auto& n : r.notes) CHECK(n.find("stale") == std::string::npos);
}

TEST_CASE("lock: concurrent contenders always name the real holder, never pid 0") {
  // Rounds of contenders released at the same instant on a fresh lock (as two
  // applies started together): the window between taking the flock and the
  // pid being in the file is where "pid 0 ... kill 0" came from.
  testing::ScratchDir d;
  host::Sysroot sys(d.path());
  ensure_state_dir(sys);
  constexpr int kProcs = 4, kRounds = 400;
  int go[2], out[2];
  REQUIRE(pipe(go) == 0);
  REQUIRE(pipe(out) == 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < kProcs; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      close(out[0]);
      close(go[1]);
      char c;
      for (int round = 0; round < kRounds; ++round) {
        if (read(go[0], &c, 1) != 1) _exit(1);
        try {
          StateLock lock(sys);
          usleep(500);
          lock.release();
          dprintf(out[1], "held\n");
        } catch (const LockHeldError& e) {
          bool kill0 = std::string(e.what()).find("kill 0") != std::string::npos;
          dprintf(out[1], "%d %d\n", e.pid(), kill0 ? 1 : 0);
        } catch (const std::exception& e) {
          dprintf(out[1], "error %s\n", e.what());
        }
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(out[1]);
  close(go[0]);
  FILE* reports = fdopen(out[0], "r");
  REQUIRE(reports != nullptr);
  int contended = 0, held = 0;
  char line[1024];
  for (int round = 0; round < kRounds; ++round) {
    REQUIRE(write(go[1], "gggg", kProcs) == kProcs);
    for (int i = 0; i < kProcs; ++i) {
      REQUIRE(fgets(line, sizeof line, reports) != nullptr);
      if (std::string(line) == "held\n") {
        ++held;
        continue;
      }
      CAPTURE(line);
      int pid = 0, kill0 = 0;
      REQUIRE(std::sscanf(line, "%d %d", &pid, &kill0) == 2);
      CHECK(std::find(kids.begin(), kids.end(), pid) != kids.end());
      CHECK(kill0 == 0);
      ++contended;
    }
  }
  fclose(reports);
  close(go[1]);
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  CHECK(held >= kRounds);
  CHECK(contended > 0);
  CHECK(!fs::exists(d.path() / "var/lib/epyctune/lock"));
}

TEST_CASE("lock: the private file of a taker that died before linking it is removed") {
  testing::ScratchDir d;
  put(d.path(), "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  std::string leftover = "var/lib/epyctune/lock." + std::to_string(dead) + ".0";
  put(d.path(), leftover, std::to_string(dead) + "\n");
  REQUIRE(apply_knobs(sys, one_knob(), {}).exit_code == kExitOk);
  CHECK(!fs::exists(d.path() / leftover));
  CHECK(revert_journal(sys).exit_code == kExitOk);
}

TEST_CASE("lock: threads of one process exclude each other and name their process") {
  testing::ScratchDir d;
  host::Sysroot sys(d.path());
  ensure_state_dir(sys);
  std::atomic<int> inside{0}, overlaps{0}, contended{0}, wrong_pid{0}, errors{0};
  auto worker = [&] {
    for (int i = 0; i < 300; ++i) {
      try {
        StateLock lock(sys);
        if (inside.fetch_add(1) != 0) ++overlaps;
        std::this_thread::yield();
        inside.fetch_sub(1);
      } catch (const LockHeldError& e) {
        ++contended;
        if (e.pid() != getpid()) ++wrong_pid;
      } catch (const std::exception&) {
        ++errors;
      }
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  CHECK(overlaps == 0);
  CHECK(wrong_pid == 0);
  CHECK(errors == 0);
  CHECK(!fs::exists(d.path() / "var/lib/epyctune/lock"));
}
