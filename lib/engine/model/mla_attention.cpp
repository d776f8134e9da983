// deepseek2's multi-head latent attention (MlaConfig), and its shared experts.
//
// The latent is expanded to every head's k_nope and v before caching: the
// KV cache holds n_heads keys of qk_nope + n_rot and values padded to the
// same size per token and layer (V2-Lite: 16 x 192 x 2 floats, against
// kv_lora_rank + n_rot = 576 for llama.cpp's latent cache). Simple and
// exact; caching the latent instead is the memory-saving form.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_impl.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {
namespace {

// ggml's YaRN: angles between interpolated (freq_scale) and extrapolated
// ones, by a ramp over the rotary dimensions whose wavelengths fit the
// original context between beta_fast (32) and beta_slow (1) times.
struct YarnRamp {
  float low = 0, high = 0;
  YarnRamp() = default;
  explicit YarnRamp(const LlamaConfig& c) {
    auto corr = [&](float n_rot) {
      return c.n_rot * std::log(c.rope_orig_ctx / (n_rot * 2.0f * float(M_PI))) /
             (2.0f * std::log(c.rope_freq_base));
    };
    low = std::max(0.0f, std::floor(corr(32.0f)));
    high = std::min(float(c.n_rot - 1), std::ceil(corr(1.0f)));
  }
  float mix(int i) const {
    const float y = (float(i) - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
  }
};

// Rotates adjacent pairs of x[0 .. n_rot) (llama.cpp's NORM rope for
// deepseek2) at position pos.
void rope_norm(const LlamaConfig& c, float* x, int pos) {
  const int half = c.n_rot / 2;
  const bool yarn = c.rope_scaling == RopeScaling::yarn;
  const YarnRamp ramp = yarn ? YarnRamp(c) : YarnRamp{};
  for (int i = 0; i < half; ++i) {
    const double extrap =
        static_cast<double>(pos) * std::pow(double(c.rope_freq_base), -2.0 * i / c.n_rot);
    double theta = extrap * c.rope_freq_scale;
    if (yarn) {
      const double m = ramp.mix(i);
      theta = theta * (1.0 - m) + extrap * m;
    }
    const float cs = static_cast<float>(std::cos(theta)), sn = static_cast<float>(std::sin(theta));
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * cs - x1 * sn;
    x[2 * i + 1] = x0 * sn + x1 * cs;
  }
}

// llama.cpp's kq_scale for deepseek2: 1/sqrt(key head size), times mscale^2
// under YaRN (mscale = 1 + yarn_log_multiplier * ln(factor), as DeepSeek's
// softmax_scale).
float kq_scale(const LlamaConfig& c) {
  float m = 1.0f;
  if (c.rope_scaling == RopeScaling::yarn)
    m = 1.0f + c.mla.yarn_log_mul * std::log(1.0f / c.rope_freq_scale);
  return m * m / std::sqrt(static_cast<float>(c.head_dim));
}

}  // namespace

// x += wo * attention, xn = rmsnorm(x): Q and the latent from xn, rope on
// their rope parts, the latent expanded to keys and values, the cache, and
// causal attention per head.
void LlamaModel::mla_attention_block(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const auto& m = L.mla;
  const int dim = c.dim, H = c.n_heads, qk = c.head_dim, r = c.mla.kv_lora_rank;
  const int kva_w = r + c.n_rot, ql = c.mla.q_lora_rank;
  s.mla_kva.resize(size_t(B) * kva_w);
  s.mla_lat.resize(size_t(B) * r);
  for (int t = 0; t < B; ++t)
    kernels::rmsnorm(&s.xn[size_t(t) * dim], &s.x[size_t(t) * dim], L.attn_norm.data(), dim,
                     c.norm_eps);
  const Mat& q_in = ql > 0 ? m.wq_a : L.wq;
  float* q_out = s.q.data();
  if (ql > 0) {
    s.mla_qa.resize(size_t(B) * ql);
    q_out = s.mla_qa.data();
  }
  detail::prepare_acts(*pool_, q_in.type, s.xn.data(), B, dim, s.acts_a);
  const kernels::Acts* akv = &s.acts_a;
  if (m.wkv_a.type != q_in.type) {
    detail::prepare_acts(*pool_, m.wkv_a.type, s.xn.data(), B, dim, s.acts_b);
    akv = &s.acts_b;
  }
  detail::run_matmuls(*pool_, {{&q_in, &s.acts_a, q_out, ql > 0 ? ql : H * qk},
                               {&m.wkv_a, akv, s.mla_kva.data(), kva_w}});
  if (ql > 0) {
    for (int t = 0; t < B; ++t)
      kernels::rmsnorm(&s.mla_qa[size_t(t) * ql], &s.mla_qa[size_t(t) * ql], m.q_a_norm.data(), ql,
                       c.norm_eps);
    detail::prepare_acts(*pool_, m.wq_b.type, s.mla_qa.data(), B, ql, s.acts_a);
    detail::run_matmuls(*pool_, {{&m.wq_b, &s.acts_a, s.q.data(), H * qk}});
  }
  for (int t = 0; t < B; ++t) {
    float* kva = &s.mla_kva[size_t(t) * kva_w];
    kernels::rmsnorm(&s.mla_lat[size_t(t) * r], kva, m.kv_a_norm.data(), r, c.norm_eps);
    const int p = s.at[size_t(t)].pos;
    rope_norm(c, kva + r, p);
    for (int h = 0; h < H; ++h)
      rope_norm(c, &s.q[size_t(t) * H * qk + size_t(h) * qk] + (qk - c.n_rot), p);
  }
  mla_expand_kv(il, B);
  mla_attend(il, B);
  const int vd = H * c.mla.v_head_dim;
  detail::prepare_acts(*pool_, L.wo.type, s.att.data(), B, vd, s.acts_a);
  detail::run_matmuls(*pool_, {{&L.wo, &s.acts_a, s.ffn_out.data(), dim}});
  for (int t = 0; t < B; ++t) kernels::add(&s.x[size_t(t) * dim], &s.ffn_out[size_t(t) * dim], dim);
}

// Each head's key [k_nope | shared rope key] and value (padded with zeros to
// the key's size) from the normed latent, into the cache.
void LlamaModel::mla_expand_kv(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& m = s.w.layers[il].mla;
  const int H = c.n_heads, qk = c.head_dim, r = c.mla.kv_lora_rank;
  const int nope = c.mla.qk_nope, vh = c.mla.v_head_dim, kva_w = r + c.n_rot;
  const bool split = m.wkv_b.rows == 0;
  if (split) {
    s.mla_kn.resize(size_t(B) * H * nope);
    s.mla_v.resize(size_t(B) * H * vh);
    detail::prepare_acts(*pool_, m.wk_b_t.type, s.mla_lat.data(), B, r, s.acts_a);
    const kernels::Acts* av = &s.acts_a;
    if (m.wv_b.type != m.wk_b_t.type) {
      detail::prepare_acts(*pool_, m.wv_b.type, s.mla_lat.data(), B, r, s.acts_b);
      av = &s.acts_b;
    }
    detail::run_matmuls(*pool_, {{&m.wk_b_t, &s.acts_a, s.mla_kn.data(), H * nope},
                                 {&m.wv_b, av, s.mla_v.data(), H * vh}});
  } else {
    s.mla_kvx.resize(size_t(B) * H * (nope + vh));
    detail::prepare_acts(*pool_, m.wkv_b.type, s.mla_lat.data(), B, r, s.acts_a);
    detail::run_matmuls(*pool_, {{&m.wkv_b, &s.acts_a, s.mla_kvx.data(), H * (nope + vh)}});
  }
  for (int t = 0; t < B; ++t) {
    float* k = &s.k[size_t(t) * H * qk];
    float* v = &s.v[size_t(t) * H * qk];
    const float* kpe = &s.mla_kva[size_t(t) * kva_w + r];
    for (int h = 0; h < H; ++h) {
      const float* kn = split ? &s.mla_kn[(size_t(t) * H + h) * nope]
                              : &s.mla_kvx[(size_t(t) * H + h) * (nope + vh)];
      const float* vv = split ? &s.mla_v[(size_t(t) * H + h) * vh] : kn + nope;
      float* kh = k + size_t(h) * qk;
      float* vh_out = v + size_t(h) * qk;
      std::memcpy(kh, kn, sizeof(float) * nope);
      std::memcpy(kh + nope, kpe, sizeof(float) * c.n_rot);
      std::memcpy(vh_out, vv, sizeof(float) * vh);
      std::fill(vh_out + vh, vh_out + qk, 0.0f);
    }
    s.at[size_t(t)].kv->store(il, s.at[size_t(t)].pos, k, v);
  }
}

// att[t][h] = softmax(q k^T * kq_scale) v over layer il's cache, causal; the
// first v_head_dim of each padded value.
void LlamaModel::mla_attend(int il, [[maybe_unused]] int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const int H = c.n_heads, qk = c.head_dim, vh = c.mla.v_head_dim;
  const float scale = kq_scale(c);
  // One work item per (sequence, head).
  const int n_seg = static_cast<int>(s.segs.size());
  pool_->parallel_for(int64_t(n_seg) * H, 1, [&](int64_t b, int64_t e, int tid) {
    auto& ts = s.scratch[tid];
    for (int64_t item = b; item < e; ++item) {
      const int h = static_cast<int>(item % H);
      const auto [t0, t1] = s.segs[size_t(item / H)];
      const KvCache& kv = *s.at[size_t(t0)].kv;
      const int pos0 = s.at[size_t(t0)].pos;
      const int n_max = pos0 + (t1 - t0);
      if (ts.scores.size() < size_t(n_max) + qk) {
        const size_t cap = std::min<size_t>(n_ctx_, std::max<size_t>(n_max, ts.scores.size() * 2));
        ts.keys.resize(cap * qk);
        ts.vals.resize(cap * qk);
        ts.scores.resize(cap + qk);  // + one padded output head
      }
      float* out = ts.scores.data() + (ts.scores.size() - qk);
      kv.load_k(il, h, 0, n_max, ts.keys.data());
      kv.load_v(il, h, 0, n_max, ts.vals.data());
      for (int t = t0; t < t1; ++t) {
        kernels::attend(&s.q[(size_t(t) * H + h) * qk], ts.keys.data(), ts.vals.data(),
                        pos0 + (t - t0) + 1, qk, scale, ts.scores.data(), out);
        std::memcpy(&s.att[(size_t(t) * H + h) * vh], out, sizeof(float) * vh);
      }
    }
  });
}

// ffn_out += the shared experts' SwiGLU of xn (ffn_{gate,up,down}_shexp),
// after the routed experts' sum, as llama.cpp adds them.
void LlamaModel::shared_experts(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& w = s.w.layers[il].moe;
  const int dim = c.dim, F = static_cast<int>(w.gate_shexp.rows);
  s.sh_gate.resize(size_t(B) * F);
  s.sh_up.resize(size_t(B) * F);
  detail::prepare_acts(*pool_, w.gate_shexp.type, s.xn.data(), B, dim, s.acts_a);
  const kernels::Acts* au = &s.acts_a;
  if (w.up_shexp.type != w.gate_shexp.type) {
    detail::prepare_acts(*pool_, w.up_shexp.type, s.xn.data(), B, dim, s.acts_b);
    au = &s.acts_b;
  }
  detail::run_matmuls(*pool_, {{&w.gate_shexp, &s.acts_a, s.sh_gate.data(), F},
                               {&w.up_shexp, au, s.sh_up.data(), F}});
  for (int t = 0; t < B; ++t)
    kernels::silu_mul(&s.sh_gate[size_t(t) * F], &s.sh_up[size_t(t) * F], F);
  detail::prepare_acts(*pool_, w.down_shexp.type, s.sh_gate.data(), B, F, s.acts_a);
  // The down projection into xn (free once the experts have read it), then
  // one add per token row.
  detail::run_matmuls(*pool_, {{&w.down_shexp, &s.acts_a, s.xn.data(), dim}});
  for (int t = 0; t < B; ++t)
    kernels::add(&s.ffn_out[size_t(t) * dim], &s.xn[size_t(t) * dim], dim);
}

}  // namespace epyctune::engine
