#include <doctest/doctest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/runtime/shared_weights.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;
namespace fs = std::filesystem;

namespace {

// A store directory on /dev/shm (tmpfs, where stores are meant to live) when
// there is one, else inside `fallback`.
class StoreDir {
 public:
  explicit StoreDir(const TempDir& fallback) {
    const fs::path shm = "/dev/shm";
    path_ = fs::is_directory(shm) && ::access(shm.c_str(), W_OK) == 0
                ? shm / fs::path(fallback.path()).filename()
                : fallback.path() / "store";
    fs::create_directories(path_);
  }
  ~StoreDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const int kTokens = 12;

// Greedy generation from a fixed prompt: the tokens a model picks.
std::vector<int32_t> generate(LlamaModel& m) {
  std::vector<int32_t> toks{1, 7, 42, 3};
  std::vector<float> logits(m.n_vocab());
  m.forward_last(toks, logits.data());
  std::vector<int32_t> out;
  for (int i = 0; i < kTokens; ++i) {
    int32_t t = argmax(logits.data(), m.n_vocab());
    out.push_back(t);
    m.forward({&t, 1}, logits.data());
  }
  return out;
}

ModelOptions shared_options(const fs::path& dir) {
  ModelOptions o;
  o.shared_weights = dir;
  return o;
}

std::vector<int32_t> private_tokens(const fs::path& model) {
  auto pool = runtime::ThreadPool::unpinned(2);
  auto m = LlamaModel::load(model, pool);
  CHECK_FALSE(m->load_report().shared.shared);
  return generate(*m);
}

bool mapped_shared_read_only(const std::string& file) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line))
    if (line.find(file) != std::string::npos && line.find(" r--s ") != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("two loads from one store generate what a private copy generates, from one file") {
  TempDir dir;
  StoreDir store(dir);
  for (const char* quant : {"q8_0", "q4_0", "f16"}) {
    CAPTURE(quant);
    const auto model = make_model(dir, "tiny", quant);
    const auto expect = private_tokens(model);
    auto pool = runtime::ThreadPool::unpinned(2);
    auto a = LlamaModel::load(model, pool, shared_options(store.path()));
    auto b = LlamaModel::load(model, pool, shared_options(store.path()));
    const auto& sa = a->load_report().shared;
    const auto& sb = b->load_report().shared;
    CHECK(sa.shared);
    CHECK(sa.built);
    CHECK(sb.shared);
    CHECK_FALSE(sb.built);
    CHECK(sa.file == sb.file);
    struct stat st {};
    REQUIRE(::stat(sb.file.c_str(), &st) == 0);
    CHECK(sa.inode == st.st_ino);
    CHECK(sb.inode == st.st_ino);
    CHECK(mapped_shared_read_only(sb.file));
    CHECK(a->placement_summary().find("shared read-only from " + sb.file) != std::string::npos);
    CHECK(a->load_report().packed_bytes == b->load_report().packed_bytes);
    CHECK(generate(*a) == expect);
    CHECK(generate(*b) == expect);
  }
}

TEST_CASE("a changed model file, ISA layout or placement gets its own store file") {
  TempDir dir;
  StoreDir store(dir);
  const auto model = make_model(dir, "tiny", "q8_0");
  auto pool = runtime::ThreadPool::unpinned(1);
  const std::string first =
      LlamaModel::load(model, pool, shared_options(store.path()))->load_report().shared.file;

  // Same bytes, new mtime: the file may have been rewritten, so a new key.
  fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(5));
  auto touched = LlamaModel::load(model, pool, shared_options(store.path()));
  CHECK(touched->load_report().shared.built);
  CHECK(touched->load_report().shared.file != first);

  // Another model of another size in its place.
  const auto other =
      make_model(dir, "dim=64,layers=3,heads=4,kv_heads=2,ffn=192,vocab=512", "q8_0");
  fs::rename(other, model);
  auto replaced = LlamaModel::load(model, pool, shared_options(store.path()));
  CHECK(replaced->load_report().shared.built);
  CHECK(replaced->load_report().shared.file != touched->load_report().shared.file);
  CHECK(generate(*replaced) == private_tokens(model));

  // Unpacked weights are other bytes.
  ModelOptions unpacked = shared_options(store.path());
  unpacked.pack_weights = false;
  auto u = LlamaModel::load(model, pool, unpacked);
  CHECK(u->load_report().shared.built);
  CHECK(u->load_report().shared.file != replaced->load_report().shared.file);
  CHECK(generate(*u) == private_tokens(model));

  // Interleaved over the nodes here: its own placement, so its own file.
  ModelOptions numa = shared_options(store.path());
  numa.numa = runtime::NumaPolicy::interleave;
  auto n = LlamaModel::load(model, pool, numa);
  CHECK(n->load_report().shared.file != replaced->load_report().shared.file);
  CHECK(generate(*n) == private_tokens(model));
}

TEST_CASE("a truncated store file is ignored, said so, and rebuilt") {
  TempDir dir;
  StoreDir store(dir);
  const auto model = make_model(dir, "tiny", "q4_0");
  const auto expect = private_tokens(model);
  auto pool = runtime::ThreadPool::unpinned(2);
  std::string file;
  {
    auto m = LlamaModel::load(model, pool, shared_options(store.path()));
    file = m->load_report().shared.file;
  }
  ::chmod(file.c_str(), 0600);
  fs::resize_file(file, fs::file_size(file) / 2);
  ::chmod(file.c_str(), 0444);
  auto m = LlamaModel::load(model, pool, shared_options(store.path()));
  CHECK(m->load_report().shared.built);
  CHECK(m->load_report().page_note.find("ignored " + file) != std::string::npos);
  CHECK(generate(*m) == expect);
}

TEST_CASE("--mmap and a shared store do not mix") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(1);
  ModelOptions o = shared_options(dir.path());
  o.copy_weights = false;
  CHECK_THROWS_WITH_AS(LlamaModel::load(make_model(dir, "tiny", "q8_0"), pool, o),
                       doctest::Contains("drop one"), std::invalid_argument);
}

namespace {

// In a child: say so on `ready`, load from the store, generate, write "shared
// built inode lock_wait tokens..." to `out`; exit status 0 on success.
[[noreturn]] void child_load(const fs::path& model, const fs::path& store, const fs::path& out,
                             int ready) {
  int rc = 1;
  try {
    auto pool = epyctune::engine::runtime::ThreadPool::unpinned(2);
    if (::write(ready, "r", 1) != 1) ::_exit(4);
    auto m = LlamaModel::load(model, pool, shared_options(store));
    const auto& s = m->load_report().shared;
    std::ofstream f(out);
    f << s.shared << ' ' << s.built << ' ' << s.inode << ' ' << s.lock_wait_s;
    for (int32_t t : generate(*m)) f << ' ' << t;
    f << '\n';
    rc = f.good() ? 0 : 2;
  } catch (...) {
    rc = 3;
  }
  ::_exit(rc);
}

struct ChildResult {
  bool shared = false, built = false;
  uint64_t inode = 0;
  double lock_wait_s = 0;
  std::vector<int32_t> tokens;
};

ChildResult read_result(const fs::path& p) {
  std::istringstream in(read_file(p));
  ChildResult r;
  in >> r.shared >> r.built >> r.inode >> r.lock_wait_s;
  for (int32_t t; in >> t;) r.tokens.push_back(t);
  return r;
}

}  // namespace

TEST_CASE("two processes loading at once: one builds, the other waits for it and shares") {
  TempDir dir;
  StoreDir store(dir);
  const auto model = make_model(dir, "tiny", "q8_0");
  // Learn the store file's name, then remove the file: both children start
  // from an empty store while this process holds the build lock, so both
  // must queue on it, and after it is released exactly one builds.
  std::string file;
  {
    auto pool = runtime::ThreadPool::unpinned(1);
    file = LlamaModel::load(model, pool, shared_options(store.path()))->load_report().shared.file;
  }
  fs::remove(file);
  int lock = ::open((file + ".lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX) == 0);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t pids[2];
  for (int i = 0; i < 2; ++i) {
    pids[i] = ::fork();
    REQUIRE(pids[i] >= 0);
    if (pids[i] == 0)
      child_load(model, store.path(), dir.path() / ("out" + std::to_string(i)), ready[1]);
  }
  ::close(ready[1]);  // a child that dies early ends the wait with EOF
  for (int i = 0; i < 2; ++i) {
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
  }
  ::close(ready[0]);
  // Long enough for both to reach the lock (a tiny model parses in
  // milliseconds), short enough to keep the test quick.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::flock(lock, LOCK_UN);
  ::close(lock);
  for (pid_t p : pids) {
    int status = 0;
    REQUIRE(::waitpid(p, &status, 0) == p);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const auto r0 = read_result(dir.path() / "out0");
  const auto r1 = read_result(dir.path() / "out1");
  CHECK(r0.shared);
  CHECK(r1.shared);
  CHECK(r0.built != r1.built);  // exactly one built it
  CHECK(r0.inode == r1.inode);
  CHECK(r0.lock_wait_s > 0.05);  // both queued on the lock
  CHECK(r1.lock_wait_s > 0.05);
  CHECK(r0.tokens.size() == size_t(kTokens));
  CHECK(r0.tokens == r1.tokens);
  CHECK(r0.tokens == private_tokens(model));
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK(st.st_ino == r0.inode);
}
