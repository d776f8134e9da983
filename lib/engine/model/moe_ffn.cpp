#include "engine/model/moe_ffn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {
namespace {

// One expert's rows of a stacked tensor: rows [e * rows, (e + 1) * rows).
Mat expert_view(const Mat& m, int e, int64_t rows) {
  Mat v = m;
  v.data = m.data + static_cast<size_t>(e) * static_cast<size_t>(rows) * m.row_bytes;
  v.rows = rows;
  return v;
}

struct Job {
  Mat m;
  const kernels::Acts* acts;
  float* y;
  int64_t ldy;
};

// The jobs' rows in one parallel region, in chunks of ~512 KiB of weights
// (the size the dense blocks use: smaller chunks stall the prefetchers, larger
// ones leave a small matrix too few chunks to balance). Every job starts at
// a multiple of 32 rows of the row space, and so does every chunk, so a chunk
// starts a packed 16-row panel; each output is computed by one chunk, so the
// split never changes a result.
void run_jobs(runtime::ThreadPool& pool, const std::vector<Job>& jobs) {
  constexpr int64_t kAlign = 32;
  auto span = [](const Job& j) { return (j.m.rows + kAlign - 1) / kAlign * kAlign; };
  int64_t total = 0, bytes = 0;
  for (const auto& j : jobs) {
    total += span(j);
    bytes += static_cast<int64_t>(j.m.bytes());
  }
  if (total == 0) return;
  const int64_t row_bytes = std::max<int64_t>(1, bytes / total);
  const int64_t grain = std::max<int64_t>(1, (int64_t{512} << 10) / row_bytes / kAlign) * kAlign;
  pool.parallel_stream(total, grain, [&](int64_t b, int64_t e, int) {
    int64_t base = 0;
    for (const auto& j : jobs) {
      const int64_t r0 = std::max(b, base), r1 = std::min(e, base + j.m.rows);
      if (r0 < r1)
        kernels::matmul_rows(j.m.type, j.m.layout, j.m.data, j.m.row_bytes, *j.acts, j.y, j.ldy,
                             r0 - base, r1 - base);
      base += span(j);
      if (base >= e) break;
    }
  });
}

[[noreturn]] void bad_tensor(const Mat& m, const std::string& why) {
  throw std::runtime_error(fmt::format("tensor '{}': {}", m.name, why));
}

void check_rows(const Mat& m, int64_t rows, int64_t cols, const char* what) {
  if (m.rows != rows || m.cols != cols)
    bad_tensor(m, fmt::format("{} rows of {}, expected {} rows of {} ({})", m.rows, m.cols, rows,
                              cols, what));
}

// A packed16 tensor interleaves 16-row panels: an expert's rows must start one.
void check_panels(const Mat& m, int64_t rows_per_expert) {
  if (m.layout == kernels::WeightLayout::packed16 && rows_per_expert % 16 != 0)
    bad_tensor(m, fmt::format("packed16 layout needs each expert's {} rows to be a multiple of 16",
                              rows_per_expert));
}

}  // namespace

void check_moe_weights(const MoeLayerWeights& w, const MoeShape& s) {
  if (s.n_expert < 1 || s.n_used < 1 || s.n_used > s.n_expert)
    throw std::runtime_error(fmt::format("{} experts used per token of {}: need 1 <= used <= count",
                                         s.n_used, s.n_expert));
  const int64_t ne = s.n_expert;
  check_rows(w.router, ne, s.dim, "expert_count x embedding_length");
  check_rows(w.gate_exps, ne * s.expert_ffn, s.dim, "expert_count * expert_feed_forward_length");
  check_rows(w.up_exps, ne * s.expert_ffn, s.dim, "expert_count * expert_feed_forward_length");
  check_rows(w.down_exps, ne * s.dim, s.expert_ffn, "expert_count * embedding_length");
  auto check_bias = [&](const std::vector<float>& b, int64_t n, const char* what) {
    if (!b.empty() && static_cast<int64_t>(b.size()) != n)
      throw std::runtime_error(fmt::format("{} bias of {} values, expected {}", what, b.size(), n));
  };
  check_bias(w.router_b, ne, "router");
  check_bias(w.gate_b, ne * s.expert_ffn, "expert gate");
  check_bias(w.up_b, ne * s.expert_ffn, "expert up");
  check_bias(w.down_b, ne * s.dim, "expert down");
  check_panels(w.gate_exps, s.expert_ffn);
  check_panels(w.up_exps, s.expert_ffn);
  check_panels(w.down_exps, s.dim);
}

void swiglu_oai(float* gate_inout, const float* up, int64_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate_inout[i], kLimit);
    const float y = std::clamp(up[i], -kLimit, kLimit);
    gate_inout[i] = x / (1.0f + std::exp(kAlpha * -x)) * (y + 1.0f);
  }
}

namespace {

// The group mask of group-limited routing: sel[e] = -inf for the experts
// outside the n_group_used groups whose two best scores sum highest.
void mask_groups(float* sel, const MoeShape& s, std::vector<float>& group_score) {
  const int G = s.n_groups, per = s.n_expert / G;
  group_score.resize(G);
  for (int g = 0; g < G; ++g) {
    float a = -INFINITY, b = -INFINITY;  // best and second best
    for (int e = g * per; e < (g + 1) * per; ++e) {
      if (sel[e] > a) {
        b = a;
        a = sel[e];
      } else if (sel[e] > b) {
        b = sel[e];
      }
    }
    group_score[g] = per > 1 ? a + b : a;
  }
  std::vector<char> keep(G, 0);
  for (int r = 0; r < s.n_group_used; ++r) {
    int best = -1;
    for (int g = 0; g < G; ++g)
      if (!keep[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
    keep[best] = 1;
  }
  for (int g = 0; g < G; ++g)
    if (!keep[g]) std::fill(sel + g * per, sel + (g + 1) * per, -INFINITY);
}

}  // namespace

void route_tokens(const float* logits, int B, const MoeShape& s, int32_t* experts, float* weights,
                  const float* bias) {
  const int ne = s.n_expert, k = s.n_used;
  std::vector<float> probs(ne), sel(ne), group_score;
  std::vector<char> taken(ne);
  for (int t = 0; t < B; ++t) {
    std::copy_n(logits + size_t(t) * ne, ne, probs.begin());
    // softmax is monotonic: selecting on logits or on probabilities picks
    // the same experts; only the weights differ.
    if (s.sigmoid) {
      for (float& p : probs) p = 1.0f / (1.0f + kernels::exp_f32(-p));
    } else if (s.gating == MoeGating::softmax_topk) {
      kernels::softmax(probs.data(), ne);
    }
    sel = probs;
    if (bias)
      for (int e = 0; e < ne; ++e) sel[e] += bias[e];
    if (s.n_groups > 1) mask_groups(sel.data(), s, group_score);
    std::fill(taken.begin(), taken.end(), 0);
    int32_t* ex = experts + size_t(t) * k;
    float* wt = weights + size_t(t) * k;
    // k passes of an argmax: k is small (8 of 128), and a strict > keeps
    // the lowest index among equal probabilities.
    for (int r = 0; r < k; ++r) {
      int best = -1;
      for (int e = 0; e < ne; ++e)
        if (!taken[e] && (best < 0 || sel[e] > sel[best])) best = e;
      taken[best] = 1;
      ex[r] = best;
      wt[r] = probs[best];
    }
    if (s.gating == MoeGating::topk_softmax) kernels::softmax(wt, k);
    if (s.norm_weights) {
      float sum = 0;
      for (int r = 0; r < k; ++r) sum += wt[r];
      // llama.cpp's floor (the smallest normal f16), so a sum that underflows
      // cannot divide by zero.
      sum = std::max(sum, 6.103515625e-5f);
      for (int r = 0; r < k; ++r) wt[r] /= sum;
    }
    if (s.weights_scale != 0.0f && s.weights_scale != 1.0f)
      for (int r = 0; r < k; ++r) wt[r] *= s.weights_scale;
  }
}

void MoeFfn::group_by_expert(int B, int n_used, int n_expert) {
  const int P = B * n_used;
  std::vector<int> count(n_expert + 1, 0);
  for (int i = 0; i < P; ++i) ++count[experts_[i] + 1];
  for (int e = 0; e < n_expert; ++e) count[e + 1] += count[e];
  active_.clear();
  for (int e = 0; e < n_expert; ++e)
    if (count[e + 1] > count[e]) active_.push_back({e, count[e], count[e + 1]});
  pair_token_.resize(P);
  pair_expert_.resize(P);
  pair_of_.resize(P);
  // A counting sort over (t, r) in order: tokens ascend within an expert.
  for (int i = 0; i < P; ++i) {
    const int e = experts_[i];
    const int p = count[e]++;
    pair_token_[p] = i / n_used;
    pair_expert_[p] = e;
    pair_of_[i] = p;
  }
}

void MoeFfn::run_router(const MoeLayerWeights& w, const MoeShape& s, const float* xn, int B,
                        runtime::ThreadPool& pool) {
  logits_.resize(size_t(B) * s.n_expert);
  kernels::prepare_acts(w.router.type, xn, B, s.dim, router_acts_);
  run_jobs(pool, {{w.router, &router_acts_, logits_.data(), s.n_expert}});
  if (!w.router_b.empty())
    for (int t = 0; t < B; ++t)
      kernels::add(&logits_[size_t(t) * s.n_expert], w.router_b.data(), s.n_expert);
  experts_.resize(size_t(B) * s.n_used);
  weights_.resize(size_t(B) * s.n_used);
  route_tokens(logits_.data(), B, s, experts_.data(), weights_.data(),
               w.probs_bias.empty() ? nullptr : w.probs_bias.data());
  if (s.n_used >= s.n_expert) return;
  for (int t = 0; t < B; ++t) {
    gap_row_.assign(logits_.begin() + ptrdiff_t(t) * s.n_expert,
                    logits_.begin() + ptrdiff_t(t + 1) * s.n_expert);
    auto kth = gap_row_.begin() + (s.n_used - 1);
    std::nth_element(gap_row_.begin(), kth, gap_row_.end(), std::greater<>());
    min_gap_ = std::min(min_gap_, *kth - *std::max_element(kth + 1, gap_row_.end()));
  }
}

// gate/up for every (token, expert) pair, SwiGLU, then down, one expert's
// rows of each tensor read once for all of its pairs. Activations are
// quantized per row, so a pair's bytes do not depend on which other tokens
// share its expert.
void MoeFfn::run_experts(const MoeLayerWeights& w, const MoeShape& s, const float* xn,
                         runtime::ThreadPool& pool) {
  const int P = static_cast<int>(pair_token_.size());
  const int dim = s.dim, F = s.expert_ffn;
  const int A = static_cast<int>(active_.size());
  xg_.resize(size_t(P) * dim);
  hg_.resize(size_t(P) * F);
  hu_.resize(size_t(P) * F);
  yd_.resize(size_t(P) * dim);
  for (int p = 0; p < P; ++p)
    std::memcpy(&xg_[size_t(p) * dim], xn + size_t(pair_token_[p]) * dim, sizeof(float) * dim);
  if (in_acts_.size() < size_t(A)) in_acts_.resize(A);
  if (hid_acts_.size() < size_t(A)) hid_acts_.resize(A);
  // Up and gate usually share a type; when not, gate's acts are prepared and
  // up falls back to its own preparation per expert below.
  const bool same_type = w.up_exps.type == w.gate_exps.type;
  std::vector<kernels::Acts> up_acts(same_type ? 0 : A);
  pool.parallel_for(A, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto& a = active_[i];
      kernels::prepare_acts(w.gate_exps.type, &xg_[size_t(a.p0) * dim], a.p1 - a.p0, dim,
                            in_acts_[i]);
      if (!same_type)
        kernels::prepare_acts(w.up_exps.type, &xg_[size_t(a.p0) * dim], a.p1 - a.p0, dim,
                              up_acts[i]);
    }
  });
  std::vector<Job> jobs;
  jobs.reserve(size_t(2) * A);
  for (int i = 0; i < A; ++i) {
    const auto& a = active_[i];
    jobs.push_back(
        {expert_view(w.gate_exps, a.expert, F), &in_acts_[i], &hg_[size_t(a.p0) * F], F});
    jobs.push_back({expert_view(w.up_exps, a.expert, F), same_type ? &in_acts_[i] : &up_acts[i],
                    &hu_[size_t(a.p0) * F], F});
  }
  run_jobs(pool, jobs);
  // SwiGLU per pair row, and the down projection's activations per expert:
  // each row takes the same code path whatever the grouping.
  pool.parallel_for(A, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto& a = active_[i];
      for (int p = a.p0; p < a.p1; ++p) {
        float* g = &hg_[size_t(p) * F];
        float* u = &hu_[size_t(p) * F];
        if (!w.gate_b.empty()) {
          kernels::add(g, &w.gate_b[size_t(a.expert) * F], F);
          kernels::add(u, &w.up_b[size_t(a.expert) * F], F);
        }
        if (s.glu == GluKind::swiglu_oai)
          swiglu_oai(g, u, F);
        else
          kernels::silu_mul(g, u, F);
      }
      kernels::prepare_acts(w.down_exps.type, &hg_[size_t(a.p0) * F], a.p1 - a.p0, F, hid_acts_[i]);
    }
  });
  jobs.clear();
  for (int i = 0; i < A; ++i) {
    const auto& a = active_[i];
    jobs.push_back(
        {expert_view(w.down_exps, a.expert, dim), &hid_acts_[i], &yd_[size_t(a.p0) * dim], dim});
  }
  run_jobs(pool, jobs);
  if (!w.down_b.empty())
    for (int p = 0; p < P; ++p)
      kernels::add(&yd_[size_t(p) * dim], &w.down_b[size_t(pair_expert_[p]) * dim], dim);
}

// out[t] = w0 * y0 + w1 * y1 + ... by rank, each product rounded before it
// is added (as llama.cpp's mul-then-add graph does): the same bits for a
// token whatever else is in the batch.
void MoeFfn::combine(const MoeShape& s, int B, float* out) const {
  const int dim = s.dim, k = s.n_used;
  for (int t = 0; t < B; ++t) {
    float* o = out + size_t(t) * dim;
    std::fill(o, o + dim, 0.0f);
    for (int r = 0; r < k; ++r) {
      const int i = t * k + r;
      kernels::axpy(o, weights_[i], &yd_[size_t(pair_of_[i]) * dim], dim);
    }
  }
}

void MoeFfn::forward(const MoeLayerWeights& w, const MoeShape& s, const float* xn, int B,
                     float* out, runtime::ThreadPool& pool) {
  if (B <= 0) return;
  run_router(w, s, xn, B, pool);
  group_by_expert(B, s.n_used, s.n_expert);
  run_experts(w, s, xn, pool);
  combine(s, B, out);
  const uint64_t per_expert = (w.gate_exps.bytes() + w.up_exps.bytes() + w.down_exps.bytes()) /
                              static_cast<uint64_t>(s.n_expert);
  bytes_read_ += w.router.bytes() + per_expert * active_.size();
}

}  // namespace epyctune::engine
