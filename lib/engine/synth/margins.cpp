#include "engine/synth/margins.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/tokenizer/tokenizer.hpp"

namespace epyctune::engine {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t kGroupSalt = 0x6d617267696e73ull;
constexpr float kGroupAmp = 1.0f;  // the group part's rms, as large as the random part

// Tokens fall in n_expert / k groups; in each layer the groups' expert sets
// are a seeded partition of the experts, so an expert serves at most one
// group and no group's direction leaks into another group's experts.
struct Routing {
  int groups = 1;
  explicit Routing(const ModelShape& s)
      : groups(std::max(1, s.experts / std::max(1, s.experts_used))) {}
  int group_of(int64_t token) const {
    return static_cast<int>(mix(uint64_t(token) ^ kGroupSalt) % uint64_t(groups));
  }
  // Group g's direction: entries +-1 (norm sqrt(dim)), hashed per element,
  // so no activation element stands out (an outlier would coarsen the q8_0
  // rounding of its block) and groups are nearly orthogonal. (Walsh
  // functions, exactly orthogonal but periodic, came out of attention with a
  // large component along the alternating one, which drowned a group.)
  float sign(int g, int64_t i) const {
    return (mix(uint64_t(g) * 0x1000003ull + uint64_t(i) + kGroupSalt) & 1) ? 1.0f : -1.0f;
  }
  // The group expert e serves in layer l, or -1.
  std::vector<int> served_by(int layer, int n_expert, int k) const {
    std::vector<int> e(static_cast<size_t>(n_expert));
    for (int i = 0; i < n_expert; ++i) e[size_t(i)] = i;
    uint64_t st = mix(uint64_t(layer) * 7919u + kGroupSalt);
    for (int i = n_expert - 1; i > 0; --i) {
      st = mix(st);
      std::swap(e[size_t(i)], e[size_t(st % uint64_t(i + 1))]);
    }
    std::vector<int> group(static_cast<size_t>(n_expert), -1);
    for (int g = 0; g < groups; ++g)
      for (int r = 0; r < k; ++r) group[size_t(e[size_t(g * k + r)])] = g;
    return group;
  }
};

int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int n = -1;
  auto r = std::from_chars(name.data() + 4, name.data() + name.size(), n);
  return r.ec == std::errc() ? n : -1;
}

// The top-1 minus top-2 gap of a row and its argmax (the lower index on ties,
// as sampling::argmax).
std::pair<int, double> top_gap(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  float second = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i)
    if (i != best) second = std::max(second, row[i]);
  return {best, double(row[best]) - double(second)};
}

// Greedy steps of every prompt: the logit rows (steps x vocab per prompt)
// besides the report.
struct Decode {
  MarginReport rep;
  std::vector<float> logits;  // [step][vocab], prompts concatenated
  std::vector<int> winner;
  std::vector<double> gap;
};

Decode decode(LlamaModel& m, const std::vector<std::string>& prompts, int steps) {
  auto tok = Tokenizer::from_gguf(m.file());
  const int V = m.n_vocab();
  Decode d;
  d.rep.min_token_gap = std::numeric_limits<double>::infinity();
  m.reset_router_gap();
  std::vector<float> row(static_cast<size_t>(V));
  for (size_t p = 0; p < prompts.size(); ++p) {
    std::vector<int32_t> ids = tok->encode(prompts[p], true);
    if (ids.empty()) throw std::invalid_argument("margin prompt '" + prompts[p] + "' is empty");
    const int n = std::min(steps, m.n_ctx() - static_cast<int>(ids.size()));
    m.truncate(0);
    m.forward_last(ids, row.data());
    std::vector<int32_t> out;
    for (int s = 0; s < n; ++s) {
      if (s > 0) m.forward(std::span<const int32_t>(&out.back(), 1), row.data());
      const auto [best, gap] = top_gap(row.data(), V);
      d.logits.insert(d.logits.end(), row.begin(), row.end());
      d.winner.push_back(best);
      d.gap.push_back(gap);
      if (gap < d.rep.min_token_gap) {
        d.rep.min_token_gap = gap;
        d.rep.min_gap_prompt = static_cast<int>(p);
        d.rep.min_gap_step = s;
      }
      out.push_back(best);
    }
    d.rep.tokens.push_back(std::move(out));
  }
  double sum = 0.0, sum2 = 0.0;
  for (float x : d.logits) sum += x, sum2 += double(x) * x;
  const double n = double(d.logits.size());
  d.rep.logit_std = n > 0 ? std::sqrt(std::max(0.0, sum2 / n - (sum / n) * (sum / n))) : 0.0;
  d.rep.min_router_gap = m.min_router_gap();
  return d;
}

// Solves (K + lambda I) x = b in place for several right-hand sides (K
// symmetric positive semi-definite, n x n, row-major), by Cholesky.
void ridge_solve(std::vector<double> k, int n, std::vector<std::vector<double>>& rhs) {
  double trace = 0.0;
  for (int i = 0; i < n; ++i) trace += k[size_t(i) * n + i];
  const double lambda = 1e-6 * trace / std::max(1, n) + 1e-30;
  for (int i = 0; i < n; ++i) k[size_t(i) * n + i] += lambda;
  for (int j = 0; j < n; ++j) {
    double d = k[size_t(j) * n + j];
    for (int p = 0; p < j; ++p) d -= k[size_t(j) * n + p] * k[size_t(j) * n + p];
    d = std::sqrt(std::max(d, lambda));
    k[size_t(j) * n + j] = d;
    for (int i = j + 1; i < n; ++i) {
      double v = k[size_t(i) * n + j];
      for (int p = 0; p < j; ++p) v -= k[size_t(i) * n + p] * k[size_t(j) * n + p];
      k[size_t(i) * n + j] = v / d;
    }
  }
  for (auto& b : rhs) {
    for (int i = 0; i < n; ++i) {
      double v = b[size_t(i)];
      for (int p = 0; p < i; ++p) v -= k[size_t(i) * n + p] * b[size_t(p)];
      b[size_t(i)] = v / k[size_t(i) * n + i];
    }
    for (int i = n - 1; i >= 0; --i) {
      double v = b[size_t(i)];
      for (int p = i + 1; p < n; ++p) v -= k[size_t(p) * n + i] * b[size_t(p)];
      b[size_t(i)] = v / k[size_t(i) * n + i];
    }
  }
}

struct RowPatch {
  uint64_t file_offset;
  std::vector<uint8_t> bytes;
};

// New head rows for the steps whose gap is short of target: row v gains
// delta_v = W^T Lambda^T a_v, where Lambda holds the steps' logits (Lambda =
// W h_s, so delta_v . h_s = (Lambda Lambda^T a_v)_s) and a_v solves
// Lambda Lambda^T a_v = the raise v needs at the steps it wins, 0 elsewhere.
std::vector<RowPatch> correct_head(const LlamaModel& m, const Decode& d, double target) {
  const gguf::File& f = m.file();
  const gguf::TensorInfo* head = f.tensor("output.weight");
  if (!head)
    throw std::runtime_error(f.path() +
                             ": unsupported: a tied head (no output.weight) cannot "
                             "carry planted margins without changing the embeddings");
  const int V = m.n_vocab(), S = static_cast<int>(d.winner.size());
  const int64_t dim = head->ne[0];
  std::map<int, std::vector<double>> raise;  // winner -> raise per step
  // Steps just above the target are raised too, and every raise overshoots:
  // the raises widen the logits' spread (so the target, a multiple of it,
  // grows) and requantising a row moves its logits a little.
  for (int s = 0; s < S; ++s) {
    if (d.gap[size_t(s)] >= 1.1 * target) continue;
    auto& r = raise[d.winner[size_t(s)]];
    r.resize(size_t(S), 0.0);
    r[size_t(s)] = 1.3 * target - d.gap[size_t(s)];
  }
  if (raise.empty()) return {};
  std::vector<double> gram(size_t(S) * S);
  for (int a = 0; a < S; ++a)
    for (int b = 0; b <= a; ++b) {
      const float* x = &d.logits[size_t(a) * V];
      const float* y = &d.logits[size_t(b) * V];
      double acc = 0.0;
      for (int u = 0; u < V; ++u) acc += double(x[u]) * y[u];
      gram[size_t(a) * S + b] = gram[size_t(b) * S + a] = acc;
    }
  std::vector<std::vector<double>> rhs;
  std::vector<int> rows;
  for (auto& [v, r] : raise) rows.push_back(v), rhs.push_back(r);
  ridge_solve(gram, S, rhs);
  const size_t W = rows.size();
  std::vector<float> coef(W * size_t(V), 0.0f);  // c_v = Lambda^T a_v
  for (size_t w = 0; w < W; ++w)
    for (int s = 0; s < S; ++s) {
      const float a = static_cast<float>(rhs[w][size_t(s)]);
      const float* l = &d.logits[size_t(s) * V];
      float* c = &coef[w * size_t(V)];
      for (int u = 0; u < V; ++u) c[u] += a * l[u];
    }
  const size_t rb = row_size(head->type, dim);
  std::vector<double> delta(W * size_t(dim), 0.0);
  std::vector<float> wrow(static_cast<size_t>(dim));
  for (int u = 0; u < V; ++u) {
    kernels::dequantize_row(head->type, head->data + size_t(u) * rb, wrow.data(), dim);
    for (size_t w = 0; w < W; ++w) {
      const double c = coef[w * size_t(V) + size_t(u)];
      double* o = &delta[w * size_t(dim)];
      for (int64_t i = 0; i < dim; ++i) o[i] += c * wrow[size_t(i)];
    }
  }
  std::vector<RowPatch> patches;
  for (size_t w = 0; w < W; ++w) {
    const int v = rows[w];
    kernels::dequantize_row(head->type, head->data + size_t(v) * rb, wrow.data(), dim);
    for (int64_t i = 0; i < dim; ++i)
      wrow[size_t(i)] += static_cast<float>(delta[w * size_t(dim) + size_t(i)]);
    RowPatch p{f.data_offset() + head->offset + uint64_t(v) * rb, std::vector<uint8_t>(rb)};
    kernels::quantize_row(head->type, wrow.data(), p.bytes.data(), dim);
    patches.push_back(std::move(p));
  }
  return patches;
}

void apply_patches(const std::filesystem::path& path, const std::vector<RowPatch>& patches) {
  std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!out) throw std::runtime_error(path.string() + ": cannot open to rewrite head rows");
  for (const auto& p : patches) {
    out.seekp(static_cast<std::streamoff>(p.file_offset));
    out.write(reinterpret_cast<const char*>(p.bytes.data()),
              static_cast<std::streamsize>(p.bytes.size()));
  }
  if (!out) throw std::runtime_error(path.string() + ": writing head rows failed");
}

}  // namespace

TensorFiller margin_filler(TensorFiller base, const ModelShape& shape, const MarginOptions& o) {
  if (shape.experts <= 0) return base;
  const Routing routing(shape);
  const int n_expert = shape.experts, k = shape.experts_used;
  const double gap = o.router_gap;
  return [base, routing, n_expert, k, gap](std::string_view name, int64_t ne0, int64_t row0,
                                           int64_t n_rows, float* out) {
    base(name, ne0, row0, n_rows, out);
    if (name == "token_embd.weight") {
      // The random part loses its components along the group directions,
      // and the token's group direction is added.
      for (int64_t r = 0; r < n_rows; ++r) {
        float* row = out + r * ne0;
        for (int g = 0; g < routing.groups; ++g) {
          double dot = 0.0;
          for (int64_t i = 0; i < ne0; ++i) dot += double(row[i]) * routing.sign(g, i);
          const float c = static_cast<float>(dot / double(ne0));
          for (int64_t i = 0; i < ne0; ++i) row[i] -= c * routing.sign(g, i);
        }
        const int g = routing.group_of(row0 + r);
        for (int64_t i = 0; i < ne0; ++i) row[i] += kGroupAmp * routing.sign(g, i);
      }
      return;
    }
    if (!name.ends_with("ffn_gate_inp.weight")) return;
    const int layer = std::max(layer_of(name), 0);
    // The router sees the residual after RMS norm: the embedding's group part
    // (rms kGroupAmp) among the embedding's random part (rms 1) and one block
    // output per attention and FFN so far (rms ~1 each, an overestimate: it
    // only makes the gap larger).
    const double share = kGroupAmp / std::sqrt(double(kGroupAmp) * kGroupAmp + 2.0 + 2.0 * layer);
    // Row . (share * sign) = gap for the group the expert serves.
    const float per = static_cast<float>(gap / (share * double(ne0)));
    const std::vector<int> serves = routing.served_by(layer, n_expert, k);
    for (int64_t r = 0; r < n_rows; ++r) {
      float* row = out + r * ne0;
      // The random part at logit std ~1 (mkmodel's router has 3): it still
      // orders and weights the selected experts by context.
      for (int64_t i = 0; i < ne0; ++i) row[i] /= 3.0f;
      const int g = serves[size_t(row0 + r)];
      if (g < 0) continue;
      for (int64_t i = 0; i < ne0; ++i) row[i] += per * routing.sign(g, i);
    }
  };
}

MarginReport measure_margins(LlamaModel& m, const std::vector<std::string>& prompts, int steps,
                             double token_margin) {
  MarginReport r = decode(m, prompts, steps).rep;
  r.rounds = 1;
  r.reached = r.min_token_gap >= token_margin * r.logit_std;
  return r;
}

namespace {

// The router gap to plant so that the smallest gap measured through the
// engine comes out at least half the asked one. The planted gap reaches the
// router diluted by whatever else the residual carries (biases, attention
// sinks, more blocks), by a factor that depends on the architecture; the
// measured gap is close to linear in the planted one (a x planted - noise),
// so two writes give the line and a third hits the asked gap.
struct RouterPlanting {
  double asked, gap;
  double prev_gap = 0.0, prev_got = 0.0;
  int retries = 0;
  explicit RouterPlanting(double g) : asked(g), gap(g) {}
  // Whether the file must be written again with the (updated) gap.
  bool retry(double got) {
    if (got >= 0.5 * asked || retries == 3) return false;
    double next = 2.0 * gap;
    if (retries > 0) {
      const double a = (got - prev_got) / (gap - prev_gap);
      // Aim past the asked gap: the fit is rough where noise dominates.
      if (a > 0) next = std::max(gap, gap + (1.2 * asked - got) / a);
    }
    ++retries;
    prev_gap = gap, prev_got = got;
    gap = std::min(next, 32.0 * asked);
    return true;
  }
};

}  // namespace

MarginReport write_margin_model(const std::filesystem::path& path, ModelShape shape,
                                WriteOptions wo, const MarginOptions& o,
                                runtime::ThreadPool& pool) {
  if (!(o.token_margin > 0.0)) throw std::invalid_argument("--margin: must be > 0");
  if (o.prompts.empty() || o.steps < 1)
    throw std::invalid_argument("--margin needs at least one prompt and one step");
  if (!(o.router_gap >= 0.0)) throw std::invalid_argument("--router-gap: must be >= 0");
  shape.tied_output = false;
  const TensorFiller base = wo.filler ? wo.filler : seeded_filler(wo.seed, shape);
  const bool routed = shape.experts > 0 && shape.experts_used < shape.experts;
  RouterPlanting planting(o.router_gap);
  auto write = [&] {
    MarginOptions p = o;
    p.router_gap = planting.gap;
    WriteOptions w = wo;
    w.filler = margin_filler(base, shape, p);
    write_model(path, shape, w);
  };
  write();
  ModelOptions mo;
  mo.copy_weights = false;  // the file is rewritten between rounds
  MarginReport rep;
  int rows_changed = 0, round = 0;
  bool routing_settled = !routed;
  for (;;) {
    auto m = LlamaModel::load(path, pool, mo);
    Decode d = decode(*m, o.prompts, o.steps);
    // The routing first: a rewrite replaces every weight, head included.
    if (!routing_settled) {
      routing_settled = !planting.retry(d.rep.min_router_gap);
      if (!routing_settled) {
        m.reset();
        write();
        continue;
      }
    }
    const double target = o.token_margin * d.rep.logit_std;
    rep = d.rep;
    rep.rounds = ++round;
    rep.rows_changed = rows_changed;
    rep.planted_router_gap = routed ? planting.gap : 0.0;
    rep.reached = rep.min_token_gap >= target;
    if (rep.reached || round >= o.max_rounds) break;
    auto patches = correct_head(*m, d, target);
    rows_changed += static_cast<int>(patches.size());
    m.reset();
    apply_patches(path, patches);
  }
  return rep;
}

}  // namespace epyctune::engine
