#include "engine/speculative/cost_model.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>

namespace epyctune::engine::speculative {

namespace fs = std::filesystem;

double PassTimes::at(int tokens) const {
  if (n.empty()) return 1.0;
  if (n.size() == 1) return s[0] * std::max(1, tokens) / std::max(1, n[0]);
  // The segment holding `tokens`, or the last one to extrapolate from.
  size_t i = 1;
  while (i + 1 < n.size() && n[i] < tokens) ++i;
  if (tokens <= n[0]) i = 1;
  const double slope = (s[i] - s[i - 1]) / static_cast<double>(n[i] - n[i - 1]);
  return std::max(1e-9, s[i - 1] + slope * (tokens - n[i - 1]));
}

double CostModel::round_seconds(int k) const {
  if (k <= 0) return plain_seconds();
  const double draft = draft_seconds(k);
  return overlap ? std::max(verify_seconds(k), draft) : draft + verify_seconds(k);
}

CostModel default_cost_model() {
  CostModel c;
  c.target.n = {1, 17};
  c.target.s = {1.0, 2.0};
  c.draft_s = 0.1;
  return c;
}

double expected_tokens(int k, std::span<const double> accept) {
  double e = 1.0, run = 1.0;
  for (int i = 0; i < k; ++i) {
    const double a =
        accept.empty() ? 0.0 : accept[std::min(static_cast<size_t>(i), accept.size() - 1)];
    run *= a;
    e += run;
  }
  return e;
}

double predicted_speedup(const CostModel& c, int k, std::span<const double> accept) {
  return expected_tokens(k, accept) / c.round_seconds(k) * c.plain_seconds();
}

BestK best_draft_k(const CostModel& c, int max_k, double accept) {
  const std::vector<double> a = {accept};
  BestK best;
  for (int k = 1; k <= max_k; ++k)
    if (const double r = expected_tokens(k, a) / c.round_seconds(k); r > best.tokens_per_s)
      best = {k, r};
  return best;
}

namespace {
// Times forward passes of each size (increasing, from 1) after a ctx-token
// context: the median of `passes` sweeps, or the fastest. Leaves the
// model's cache empty.
enum class Pick { median, fastest };
PassTimes time_sizes(CausalLM& m, std::vector<int> sizes, int ctx, int passes, Pick pick) {
  using Clock = std::chrono::steady_clock;
  const int nv = m.n_vocab();
  const int max_tokens = sizes.back();
  ctx = std::max(0, std::min(ctx, m.n_ctx() - max_tokens));
  std::vector<int32_t> toks(static_cast<size_t>(ctx + max_tokens));
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 7919 + 13) % nv);
  m.truncate(0);
  std::vector<float> logits(static_cast<size_t>(nv) * static_cast<size_t>(max_tokens));
  for (int off = 0; off < ctx; off += max_tokens) {
    const int n = std::min(max_tokens, ctx - off);
    m.forward(std::span<const int32_t>(toks.data() + off, static_cast<size_t>(n)), logits.data());
  }
  PassTimes t;
  t.n = std::move(sizes);
  // One warm-up pass (page faults, first-touch scratch); later sizes reuse it.
  m.forward(std::span<const int32_t>(toks.data() + ctx, 1), logits.data());
  m.truncate(ctx);
  // Sweeps over the sizes, not passes of one size in a row: a disturbance
  // of a few hundred ms (another process, the guest's bandwidth dipping)
  // then lands on one pass of several sizes, which each size's median
  // drops, not on every pass of one size, putting a step in the curve that
  // no K really has.
  std::vector<std::vector<double>> v(t.n.size());
  for (int p = 0; p < std::max(1, passes); ++p)
    for (size_t i = 0; i < t.n.size(); ++i) {
      std::span<const int32_t> batch(toks.data() + ctx, static_cast<size_t>(t.n[i]));
      const auto t0 = Clock::now();
      m.forward(batch, logits.data());
      v[i].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      m.truncate(ctx);
    }
  for (auto& vi : v) {
    std::sort(vi.begin(), vi.end());
    t.s.push_back(pick == Pick::fastest ? vi.front() : vi[vi.size() / 2]);
  }
  m.truncate(0);
  return t;
}

int clamp_tokens(const CausalLM& m, int max_tokens) {
  return std::max(1, std::min(max_tokens, m.n_ctx() - 1));
}
}  // namespace

PassTimes measure_pass_times(CausalLM& m, int max_tokens, int ctx, int passes) {
  max_tokens = clamp_tokens(m, max_tokens);
  // The sizes a controller meets most, dense at small K where the curve bends.
  std::vector<int> sizes;
  for (int n : {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33})
    if (n <= max_tokens) sizes.push_back(n);
  if (sizes.back() != max_tokens) sizes.push_back(max_tokens);
  return time_sizes(m, std::move(sizes), ctx, passes, Pick::median);
}

int probe_largest(int max_tokens) {
  return std::clamp(max_tokens, 1, kProbeLargest);
}

PassTimes probe_pass_times(CausalLM& m, int max_tokens) {
  const int q = std::min(probe_largest(max_tokens), clamp_tokens(m, max_tokens));
  std::vector<int> sizes = {1};
  if (q > 1) sizes.push_back(q);
  // No context before the passes: at the few dozen positions a context
  // would add, attention is noise beside the weights, and prefilling it
  // costs a 7B on one CPU seconds. The fastest of two sweeps: a disturbance
  // only ever slows a pass, and a probe is cached for good, so one slowed
  // pass must not decide every later run's layout.
  return time_sizes(m, std::move(sizes), 0, 2, Pick::fastest);
}

fs::path cost_cache_dir() {
  // Under a unit with CacheDirectory=epyctune, systemd names the directory it
  // made (and may write under ProtectHome=yes, which hides $HOME) in
  // $CACHE_DIRECTORY, several ':'-separated when the unit lists several: the
  // first is ours. It is the directory itself, so nothing is appended.
  if (const char* c = std::getenv("CACHE_DIRECTORY"); c && *c) {
    const std::string_view all(c);
    return fs::path(all.substr(0, all.find(':')));
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "epyctune";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "epyctune";
  return {};
}

std::string cost_cache_key(const fs::path& model, const std::string& cpus, const std::string& isa) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(model, ec);
  struct stat st {};
  const bool ok = ::stat(model.c_str(), &st) == 0;
  return (ec ? model : abs).string() + "|size=" + std::to_string(ok ? st.st_size : -1) +
         "|mtime=" + std::to_string(ok ? st.st_mtim.tv_sec : -1) + "." +
         std::to_string(ok ? st.st_mtim.tv_nsec : 0) + "|cpus=" + cpus + "|isa=" + isa;
}

fs::path cost_cache_file(const fs::path& dir, const std::string& key) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a: stable across builds, unlike std::hash
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ULL;
  char name[40];
  std::snprintf(name, sizeof name, "passes-%016llx.json", static_cast<unsigned long long>(h));
  return dir / name;
}

std::optional<PassTimes> read_cost_cache(const fs::path& file, const std::string& key,
                                         std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<PassTimes> {
    if (why) *why = file.string() + ": " + w;
    return std::nullopt;
  };
  std::ifstream in(file);
  if (!in) return fail("not there");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not JSON; measuring again");
  if (j.value("version", 0) != 1) return fail("unknown version; measuring again");
  if (!j.contains("key") || !j["key"].is_string() || j["key"].get<std::string>() != key)
    return fail("for another model file or host; measuring again");
  if (!j.contains("n") || !j.contains("s") || !j["n"].is_array() || !j["s"].is_array() ||
      j["n"].size() != j["s"].size() || j["n"].empty())
    return fail("\"n\" and \"s\" must be arrays of the same non-zero length; measuring again");
  PassTimes t;
  for (size_t i = 0; i < j["n"].size(); ++i) {
    const auto& n = j["n"][i];
    const auto& s = j["s"][i];
    if (!n.is_number_integer() || !s.is_number())
      return fail("a non-number entry; measuring again");
    const int ni = n.get<int>();
    const double si = s.get<double>();
    if (ni < 1 || (!t.n.empty() && ni <= t.n.back()) || !std::isfinite(si) || si <= 0)
      return fail("batch sizes must increase from 1 and times be positive; measuring again");
    t.n.push_back(ni);
    t.s.push_back(si);
  }
  if (t.n.front() != 1) return fail("no single-token time; measuring again");
  return t;
}

void write_cost_cache(const fs::path& file, const std::string& key, const PassTimes& t) {
  fs::create_directories(file.parent_path());
  nlohmann::json j = {{"version", 1}, {"key", key}, {"n", t.n}, {"s", t.s}};
  // Written aside and renamed, so a reader never sees half a file.
  const fs::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(2) << '\n';
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, file);
}

PassTimes cached_pass_times(CausalLM& m, const std::string& key, int max_tokens, bool use_cache,
                            std::string* note) {
  const fs::path dir = cost_cache_dir();
  const fs::path file = dir.empty() ? fs::path() : cost_cache_file(dir, key);
  if (use_cache && !file.empty()) {
    std::string why;
    if (auto t = read_cost_cache(file, key, &why); t && t->n.back() >= probe_largest(max_tokens)) {
      if (note) *note = "pass times from " + file.string();
      return *t;
    } else if (note) {
      *note = t ? file.string() + ": too few batch sizes; measuring again" : why;
    }
  }
  PassTimes t = probe_pass_times(m, max_tokens);
  if (use_cache && !file.empty()) {
    try {
      write_cost_cache(file, key, t);
    } catch (const std::exception& e) {
      if (note) *note += std::string("; cache not written: ") + e.what();
    }
  }
  return t;
}

}  // namespace epyctune::engine::speculative
