// The journal's format and failure modes, and the one-writer lock.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

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

TEST_CASE("journal: header, entries, torn tail ignored, malformed line named") {
  testing::ScratchDir d;
  put(d.path(), "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  auto r = apply_knobs(sys, one_knob(), {});
  REQUIRE(r.exit_code == kExitOk);
  Journal j(sys);
  auto c = j.load();
  CHECK(c.exists);
  REQUIRE(c.entries.size() == 1);
  CHECK(c.entries[0].line == 2);
  CHECK(c.entries[0].original.raw == "1\n");
  CHECK(c.created_dirs == std::vector<std::string>{"/var", "/var/lib", "/var/lib/epyctune"});

  SUBCASE("a torn last line (crash inside the append) is ignored") {
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app) << "{\"type\":\"orig";
    auto c2 = j.load();
    CHECK(c2.entries.size() == 1);
    CHECK(!c2.torn_tail.empty());
  }
  SUBCASE("a malformed complete line stops apply and revert, naming the line") {
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app) << "{not json}\n";
    try {
      j.load();
      FAIL("expected JournalError");
    } catch (const JournalError& e) {
      CHECK(e.line() == 3);
      CHECK(std::string(e.what()).find("line 3") != std::string::npos);
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
    std::ofstream(d.path() / "var/lib/epyctune/journal", std::ios::app)
        << "{\"type\":\"original\",\"step\":\"x\",\"name\":\"y\",\"knob\":{\"kind\":\"value\"}}\n";
    CHECK_THROWS_WITH_AS(j.load(), doctest::Contains("line 3: missing field 'path'"), JournalError);
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
