// The attention block: Q/K/V projections (with qwen2's biases), qwen3's
// per-head Q/K norms, rope, the KV cache, and causal GQA attention.
#include <algorithm>
#include <cmath>

#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_impl.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {

// q, k, v = wq xn, wk xn, wv xn for the B token rows of xn.
void LlamaModel::project_qkv(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const int dim = c.dim;
  detail::prepare_acts(*pool_, L.wq.type, s.xn.data(), B, dim, s.acts_a);
  const kernels::Acts* ak = &s.acts_a;
  const kernels::Acts* av = &s.acts_a;
  if (L.wk.type != L.wq.type) {
    detail::prepare_acts(*pool_, L.wk.type, s.xn.data(), B, dim, s.acts_b);
    ak = &s.acts_b;
  }
  if (L.wv.type != L.wq.type) {
    if (L.wv.type == L.wk.type) {
      av = ak;
    } else {
      detail::prepare_acts(*pool_, L.wv.type, s.xn.data(), B, dim, s.acts_c);
      av = &s.acts_c;
    }
  }
  detail::run_matmuls(*pool_, {{&L.wq, &s.acts_a, s.q.data(), c.q_dim()},
                               {&L.wk, ak, s.k.data(), c.kv_dim()},
                               {&L.wv, av, s.v.data(), c.kv_dim()}});
}

// One token's q, k, v rows after the projections: biases (qwen2), per-head
// RMS norms (qwen3), then rope at position p.
void LlamaModel::finish_qkv(int il, float* q, float* k, float* v, int p) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const int hd = c.head_dim;
  if (!L.bq.empty()) {
    kernels::add(q, L.bq.data(), c.q_dim());
    kernels::add(k, L.bk.data(), c.kv_dim());
    kernels::add(v, L.bv.data(), c.kv_dim());
  }
  if (!L.q_norm.empty()) {
    for (int h = 0; h < c.n_heads; ++h)
      kernels::rmsnorm(q + size_t(h) * hd, q + size_t(h) * hd, L.q_norm.data(), hd, c.norm_eps);
    for (int h = 0; h < c.n_kv_heads; ++h)
      kernels::rmsnorm(k + size_t(h) * hd, k + size_t(h) * hd, L.k_norm.data(), hd, c.norm_eps);
  }
  s.rope->apply(q, c.n_heads, p);
  s.rope->apply(k, c.n_kv_heads, p);
}

// x += wo * attention(rope(q), rope(k), v), from xn = rmsnorm(x); each row's
// key and value go into its sequence's cache at its position.
void LlamaModel::attention_block(int il, int B) {
  if (cfg_.mla.kv_lora_rank > 0) return mla_attention_block(il, B);
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const int dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim();
  for (int t = 0; t < B; ++t)
    kernels::rmsnorm(&s.xn[size_t(t) * dim], &s.x[size_t(t) * dim], L.attn_norm.data(), dim,
                     c.norm_eps);
  project_qkv(il, B);
  for (int t = 0; t < B; ++t) {
    const auto [kv, p] = s.at[size_t(t)];
    float* k = &s.k[size_t(t) * kvd];
    float* v = &s.v[size_t(t) * kvd];
    finish_qkv(il, &s.q[size_t(t) * qd], k, v, p);
    kv->store(il, p, k, v);
  }
  attend_cached(il, B);
  detail::prepare_acts(*pool_, L.wo.type, s.att.data(), B, qd, s.acts_a);
  detail::run_matmuls(*pool_, {{&L.wo, &s.acts_a, s.ffn_out.data(), dim}});
  // Element-wise ops run per token row so each row takes the same code path
  // (vector body vs tail) whatever the batch size.
  if (!L.bo.empty())
    for (int t = 0; t < B; ++t) kernels::add(&s.ffn_out[size_t(t) * dim], L.bo.data(), dim);
  for (int t = 0; t < B; ++t) kernels::add(&s.x[size_t(t) * dim], &s.ffn_out[size_t(t) * dim], dim);
}

namespace {

// Up to this many tiles of queries per work item, attend_pages reads an F16
// cache in place (attend_cached).
constexpr int kInPlaceTiles = 8;

// One head's attention with a learned sink (gpt-oss): the sink is one more
// logit in the softmax, with no value, so it only takes probability mass
// from the positions: softmax over [q.k_0 * scale, ..., sink], the sink's
// share dropped. scores needs n + 1 floats.
void attend_with_sink(const float* q, const float* keys, const float* vals, int n, int hd,
                      float scale, float sink, float* scores, float* out) {
  for (int j = 0; j < n; ++j) scores[j] = kernels::dot_f32(q, keys + size_t(j) * hd, hd) * scale;
  scores[n] = sink;
  kernels::softmax(scores, n + 1);
  std::fill(out, out + hd, 0.0f);
  for (int j = 0; j < n; ++j) kernels::axpy(out, scores[j], vals + size_t(j) * hd, hd);
}

}  // namespace

// att = softmax(q k^T * scale) v per query head, causal, over layer il's cache;
// a sliding-window layer sees only the last n_swa positions, and a head with
// a sink has it in its softmax.
void LlamaModel::attend_cached(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const int qd = c.q_dim(), hd = c.head_dim;
  const auto& sinks = s.w.layers[il].sinks;
  const int window = c.swa_layer(il) ? c.n_swa : 0;
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // One work item per (kv head, run of tokens of one sequence): the head's
  // keys and values are converted once for the run's last token and serve
  // every token of the run and the `group` query heads that share them (per
  // token, an 8-token verify would convert them 8 times). Runs are whole
  // sequences unless that leaves fewer than ~4 items per thread.
  const int run = std::clamp(B * c.n_kv_heads / (4 * pool_->size()), 1, B);
  std::vector<Impl::Segment> runs;
  for (const auto& seg : s.segs)
    for (int t0 = seg.t0; t0 < seg.t1; t0 += run) runs.push_back({t0, std::min(seg.t1, t0 + run)});
  pool_->parallel_for(int64_t(runs.size()) * c.n_kv_heads, 1, [&](int64_t b, int64_t e, int tid) {
    auto& ts = s.scratch[tid];
    for (int64_t item = b; item < e; ++item) {
      const int g = static_cast<int>(item % c.n_kv_heads);
      const auto [t0, t1] = runs[size_t(item / c.n_kv_heads)];
      const KvCache& kv = *s.at[size_t(t0)].kv;
      const int pos0 = s.at[size_t(t0)].pos;  // row t is at pos0 + t - t0
      const int n_max = pos0 + (t1 - t0);     // the run's last row sees positions 0 .. n_max - 1
      const bool shared = window == 0 && sinks.empty();
      // An F16 cache is read in place (attend_pages) for a few rows, as in
      // decoding: the f32 copy is a pass over memory of its own, and it cost
      // twice attend_pages' time for a decode row at 3,000 positions. Many
      // rows (a prompt's chunk) read the keys once per kAttendTile queries,
      // and there the f32 copy, converted once, is a little faster.
      const bool in_place = shared && kv.type() == GgmlType::F16 &&
                            kernels::attend_pages_supported(hd) &&
                            (t1 - t0) * group <= kInPlaceTiles * kernels::kAttendTile;
      const size_t need = in_place ? 0 : size_t(n_max) * hd;
      if (ts.keys.size() < need || ts.scores.size() < size_t(kernels::kAttendTile) * n_max) {
        // Grow geometrically up to n_ctx: long contexts pay for what they use.
        size_t cap = std::min<size_t>(
            n_ctx_, std::max<size_t>(n_max, ts.scores.size() / kernels::kAttendTile * 2));
        if (!in_place) {
          ts.keys.resize(cap * hd);
          ts.vals.resize(cap * hd);
        }
        ts.scores.resize(kernels::kAttendTile * (cap + 1));  // + a sink
      }
      // A window layer's run needs positions from its first token's window on.
      const int lo = window > 0 ? std::max(0, pos0 - window + 1) : 0;
      if (in_place) {
        kv.f16_pages(false, il, g, n_max, ts.k_pages);
        kv.f16_pages(true, il, g, n_max, ts.v_pages);
      } else {
        kv.load_k(il, g, lo, n_max - lo, ts.keys.data());
        kv.load_v(il, g, lo, n_max - lo, ts.vals.data());
      }
      if (shared) {
        // Every query head of the group, for every row of the run, reads the
        // same keys from position 0: one shared pass over them (the rows'
        // prefixes differ, causal).
        ts.q_rows.clear();
        ts.out_rows.clear();
        ts.n_rows.clear();
        for (int t = t0; t < t1; ++t)
          for (int h = g * group; h < (g + 1) * group; ++h) {
            ts.q_rows.push_back(&s.q[size_t(t) * qd + size_t(h) * hd]);
            ts.out_rows.push_back(&s.att[size_t(t) * qd + size_t(h) * hd]);
            ts.n_rows.push_back(pos0 + (t - t0) + 1);
          }
        const int nq = static_cast<int>(ts.q_rows.size());
        if (in_place)
          kernels::attend_pages(ts.q_rows.data(), ts.n_rows.data(), nq, ts.k_pages.data(),
                                ts.v_pages.data(), hd, scale, ts.scores.data(), ts.out_rows.data());
        else
          kernels::attend_shared(ts.q_rows.data(), ts.n_rows.data(), nq, ts.keys.data(),
                                 ts.vals.data(), hd, scale, ts.scores.data(), ts.out_rows.data());
        continue;
      }
      for (int t = t0; t < t1; ++t) {
        // Causal: positions 0 .. p; in a window, the last n_swa of them
        // (llama.cpp masks a position once the query is n_swa or more ahead).
        const int p = pos0 + (t - t0);
        const int first = window > 0 ? std::max(0, p - window + 1) : 0;
        const int n = p + 1 - first;
        const float* keys = ts.keys.data() + size_t(first - lo) * hd;
        const float* vals = ts.vals.data() + size_t(first - lo) * hd;
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const float* q = &s.q[size_t(t) * qd + size_t(h) * hd];
          float* out = &s.att[size_t(t) * qd + size_t(h) * hd];
          if (sinks.empty())
            kernels::attend(q, keys, vals, n, hd, scale, ts.scores.data(), out);
          else
            attend_with_sink(q, keys, vals, n, hd, scale, sinks[h], ts.scores.data(), out);
        }
      }
    }
  });
}

}  // namespace epyctune::engine
