// exp, SiLU-times-up and softmax written once over W lanes: W = 1 is plain
// float (the scalar reference in ops.cpp), W = 8 and 16 are GCC vector types
// that float_avx2.cpp and float_avx512.cpp compile to ymm / zmm code. Every
// lane performs the same IEEE operations in the same order (the kernels
// library is built with -ffp-contract=off, so no fma appears unasked), hence
// the ISAs agree bit for bit by construction, and libm's scalar expf (which
// the vector copies could not reproduce) is out of the forward pass.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"

namespace epyctune::engine::kernels::detail {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

// (Spelled out per width: GCC drops vector_size on a dependent size.)
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
using F16 = float __attribute__((vector_size(64)));
using I16 = int32_t __attribute__((vector_size(64)));

template <int W>
struct Lanes;
template <>
struct Lanes<16> {
  using F = F16;
  using I = I16;
  static I to_int(F v) { return __builtin_convertvector(v, I); }
};
template <>
struct Lanes<8> {
  using F = F8;
  using I = I8;
  static I to_int(F v) { return __builtin_convertvector(v, I); }
};
template <>
struct Lanes<1> {
  using F = float;
  using I = int32_t;
  static I to_int(F v) { return static_cast<int32_t>(v); }
};

template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F load(const float* p) {
  typename Lanes<W>::F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <int W>
[[gnu::always_inline]] inline void store(float* p, typename Lanes<W>::F v) {
  std::memcpy(p, &v, sizeof v);
}

// e^x: Cody-Waite reduction x = n ln2 + r (ln2 in two parts, the first with
// 9 significant bits so n * kLn2Hi is exact), a degree-6 polynomial for e^r
// on |r| <= ln2/2 (Cephes' expf coefficients), and 2^n applied as two
// factors 2^floor(n/2) * 2^(n - floor(n/2)), each a normal float for n in
// [-126, 128]. Within 2 ulp of the correctly rounded result (tested);
// +inf above ln(FLT_MAX), +0 below ln(FLT_MIN) (no subnormal results), NaN
// stays NaN.
template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F exp_lanes(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  using I = typename Lanes<W>::I;
  constexpr float kHi = 88.72283935546875f, kLo = -87.33654022216797f;
  const F xc0 = x > kLo ? x : F{} + kLo;  // NaN compares false: clamped here, restored below
  const F xc = xc0 < kHi ? xc0 : F{} + kHi;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer (ties
  // to even) for |t| < 2^22, the same in every lane and the scalar path.
  const F t = xc * 1.44269504088896341f;
  const F n = (t + 12582912.0f) - 12582912.0f;
  F r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const F z = r * r;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F y = (p * z + r) + 1.0f;
  const I ni = Lanes<W>::to_int(n);
  const I n1 = ni >> 1;
  const I n2 = ni - n1;
  const F s1 = __builtin_bit_cast(F, static_cast<I>((n1 + 127) << 23));
  const F s2 = __builtin_bit_cast(F, static_cast<I>((n2 + 127) << 23));
  F e = (y * s1) * s2;
  e = x > kHi ? F{} + __builtin_inff() : e;
  e = x < kLo ? F{} : e;
  return x != x ? x : e;
}

// gate[i] = gate[i] / (1 + e^-gate[i]) * up[i]; elementwise, so the tail's
// scalar lanes compute exactly what a vector lane would.
template <int W>
void silu_mul_lanes(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const auto g = load<W>(gate + i);
    store<W>(gate + i, (g / (1.0f + exp_lanes<W>(-g))) * load<W>(up + i));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    gate[i] = (g / (1.0f + exp_lanes<1>(-g))) * up[i];
  }
}

// The largest of x[0..n), as `m = x[i] > m ? x[i] : m` from m = x[0] finds
// it, but W lanes at a time: a maximum is exact in any order, so only NaN
// (skipped unless it is x[0], which then stays) and the sign of a zero
// maximum (x - max is the same number either way) could tell the orders
// apart.
template <int W>
[[gnu::always_inline]] inline float max_lanes(const float* x, int64_t n) {
  using F = typename Lanes<W>::F;
  const float first = x[0];
  if (first != first) return first;
  F m = F{} - __builtin_inff();
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const F v = load<W>(x + i);
    m = v > m ? v : m;
  }
  float lanes[W];
  store<W>(lanes, m);
  float max = first;
  for (int l = 0; l < W; ++l) max = lanes[l] > max ? lanes[l] : max;
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  return max;
}

// Softmax in place: the max, then e^(x - max) summed into 16 stripes
// (element i into stripe i % 16) and reduced with reduce16, then scaled by
// 1 / sum. W divides 16, so stripe j is lane j % W of vector j / W.
template <int W>
void softmax_lanes(float* x, int64_t n) {
  static_assert(16 % W == 0);
  if (n <= 0) return;
  const float max = max_lanes<W>(x, n);
  typename Lanes<W>::F a[16 / W] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
#pragma GCC unroll 2
    for (int v = 0; v < 16 / W; ++v) {
      const auto e = exp_lanes<W>(load<W>(x + i + v * W) - max);
      store<W>(x + i + v * W, e);
      a[v] = a[v] + e;
    }
  }
  float acc[16];
  for (int v = 0; v < 16 / W; ++v) store<W>(acc + v * W, a[v]);
  for (int j = 0; i < n; ++i, ++j) {
    x[i] = exp_lanes<1>(x[i] - max);
    acc[j] += x[i];
  }
  const float inv = 1.0f / reduce16(acc);
  int64_t k = 0;
  for (; k + W <= n; k += W) store<W>(x + k, load<W>(x + k) * inv);
  for (; k < n; ++k) x[k] *= inv;
}

// One query head against n cached positions: scores = softmax(q . k_j *
// scale), out = sum_j scores[j] * v_j in order of j, with this ISA's dot and
// axpy (each bit-identical to the reference's), in one call instead of 2n.
template <int W, class Dot, class Axpy>
void attend_lanes(const float* q, const float* keys, const float* vals, int64_t n, int64_t hd,
                  float scale, float* scores, float* out, Dot dot, Axpy axpy) {
  for (int64_t j = 0; j < n; ++j) scores[j] = dot(q, keys + j * hd, hd) * scale;
  softmax_lanes<W>(scores, n);
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(hd));
  for (int64_t j = 0; j < n; ++j) axpy(out, scores[j], vals + j * hd, hd);
}

// Where a tile reads row j of the keys or values (kHd floats): one f32
// array, or the KV cache's f16 pages of kKvPagePositions rows, converted
// in registers by Cvt as they are read, so a long context is not first
// copied out as f32 (a pass over memory of its own). The values are the
// same either way: an f16 converts to exactly one float.
template <int kHd>
struct F32Rows {
  const float* p;
  template <int W>
  typename Lanes<W>::F lanes(int64_t j, int v) const {
    return load<W>(p + j * kHd + v * W);
  }
  void ahead(int64_t) const {}
};
template <int kHd, class Cvt>
struct F16Pages {
  const uint16_t* const* pages;
  int64_t n;  // rows the pages hold (the longest prefix)
  Cvt cvt;    // W halves at p -> W floats
  // The pages are blocks scattered over the KV pool, a few KiB each: too
  // short a run for the hardware's stream prefetch to lock on before it
  // ends, so row j asks for the row kAhead positions on, a cache line or
  // two per row rather than a page's worth at once.
  static constexpr int64_t kAhead = 4 * kKvPagePositions;
  void ahead(int64_t j) const {
    if (j + kAhead >= n) return;
    const char* r = reinterpret_cast<const char*>(row(j + kAhead));
#pragma GCC unroll 8
    for (int b = 0; b < kHd * 2; b += 64) __builtin_prefetch(r + b, 0, 3);
  }
  const uint16_t* row(int64_t j) const {
    return pages[j / kKvPagePositions] + (j % kKvPagePositions) * kHd;
  }
  template <int W>
  typename Lanes<W>::F lanes(int64_t j, int v) const {
    return cvt(row(j) + v * W);
  }
};

// For each position j below the tile's longest prefix: row j of `rows`
// loaded once as vectors, then f(i, j, row) for every query i of the tile
// that sees position j (j < ns[i]).
template <int W, int kHd, int M, class Rows, class Fn>
[[gnu::always_inline]] inline void each_position(const Rows& rows, const int64_t* ns, int64_t hi,
                                                 Fn f) {
  using F = typename Lanes<W>::F;
  constexpr int kV = kHd / W;
  for (int64_t j = 0; j < hi; ++j) {
    rows.ahead(j);
    F row[kV];
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) row[v] = rows.template lanes<W>(j, v);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i)
      if (j < ns[i]) f(i, j, row);
  }
}

// attend_lanes for M queries of one tile, hd = kHd: keys and values are
// loaded once per tile rather than once per query, and the M outputs stay
// in registers across the positions. Query i sees positions 0 .. ns[i]-1;
// its scores (row i of `scores`, `stride` apart) and output go through the
// operations attend_lanes does, in its order: the 16 dot stripes (16 / W
// vectors, summed 16 elements at a time, then `reduce`'s reduce16 tree),
// times scale, softmax_lanes, and out += scores[j] * v_j for j in order.
template <int W, int kHd, int M, class Rows, class Reduce>
[[gnu::always_inline]] inline void attend_tile(const float* const* q, const int64_t* ns,
                                               const Rows& keys, const Rows& vals, float scale,
                                               float* scores, int64_t stride, float* const* out,
                                               Reduce reduce) {
  using F = typename Lanes<W>::F;
  static_assert(kHd % 16 == 0 && 16 % W == 0);
  constexpr int kV = kHd / W, kS = 16 / W;
  int64_t hi = ns[0];
  for (int i = 1; i < M; ++i) hi = ns[i] > hi ? ns[i] : hi;
  F qv[M][kV];
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < kV; ++v) qv[i][v] = load<W>(q[i] + v * W);
  each_position<W, kHd, M>(keys, ns, hi, [&](int i, int64_t j, const F* kv) {
    F acc[kS] = {};
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) acc[v % kS] = acc[v % kS] + qv[i][v] * kv[v];
    scores[i * stride + j] = reduce(acc) * scale;
  });
  for (int i = 0; i < M; ++i) softmax_lanes<W>(scores + i * stride, ns[i]);
  F o[M][kV] = {};
  each_position<W, kHd, M>(vals, ns, hi, [&](int i, int64_t j, const F* vv) {
    const F sj = F{} + scores[i * stride + j];
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) o[i][v] = o[i][v] + sj * vv[v];
  });
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < kV; ++v) store<W>(out[i] + v * W, o[i][v]);
}

template <int W, int kHd, class Rows, class Reduce>
void attend_tiles(const float* const* q, const int64_t* ns, int nq, const Rows& keys,
                  const Rows& vals, float scale, float* scores, float* const* out, Reduce reduce) {
  int64_t stride = 0;
  for (int i = 0; i < nq; ++i) stride = ns[i] > stride ? ns[i] : stride;
  int i = 0;
  for (; i + kAttendTile <= nq; i += kAttendTile)
    attend_tile<W, kHd, kAttendTile>(q + i, ns + i, keys, vals, scale, scores, stride, out + i,
                                     reduce);
  for (; i + 2 <= nq; i += 2)
    attend_tile<W, kHd, 2>(q + i, ns + i, keys, vals, scale, scores, stride, out + i, reduce);
  if (i < nq)
    attend_tile<W, kHd, 1>(q + i, ns + i, keys, vals, scale, scores, stride, out + i, reduce);
}

// attend for nq query heads that read one KV head's positions (a GQA
// group, and the rows of one sequence in a pass): tiles of kAttendTile at
// head dims 64 and 128, attend_lanes one query at a time otherwise and for
// W = 1. Every out[i] is attend_lanes' bits either way.
template <int W, class Dot, class Axpy, class Reduce>
void attend_shared_lanes(const float* const* q, const int64_t* ns, int nq, const float* keys,
                         const float* vals, int64_t hd, float scale, float* scores,
                         float* const* out, Dot dot, Axpy axpy, Reduce reduce) {
  if (W > 1 && hd == 64)
    return attend_tiles<W, 64>(q, ns, nq, F32Rows<64>{keys}, F32Rows<64>{vals}, scale, scores, out,
                               reduce);
  if (W > 1 && hd == 128)
    return attend_tiles<W, 128>(q, ns, nq, F32Rows<128>{keys}, F32Rows<128>{vals}, scale, scores,
                                out, reduce);
  for (int i = 0; i < nq; ++i)
    attend_lanes<W>(q[i], keys, vals, ns[i], hd, scale, scores, out[i], dot, axpy);
}

// attend_shared over f16 pages, head dims 64 and 128 only: the tiles at
// every W (at W = 1 too, whose tile does attend_lanes' operations in its
// order, only with more live values than registers).
template <int W, class Reduce, class Cvt>
void attend_pages_lanes(const float* const* q, const int64_t* ns, int nq,
                        const uint16_t* const* kpages, const uint16_t* const* vpages, int64_t hd,
                        float scale, float* scores, float* const* out, Reduce reduce, Cvt cvt) {
  int64_t n = 0;
  for (int i = 0; i < nq; ++i) n = ns[i] > n ? ns[i] : n;
  if (hd == 64)
    return attend_tiles<W, 64>(q, ns, nq, F16Pages<64, Cvt>{kpages, n, cvt},
                               F16Pages<64, Cvt>{vpages, n, cvt}, scale, scores, out, reduce);
  if (hd == 128)
    return attend_tiles<W, 128>(q, ns, nq, F16Pages<128, Cvt>{kpages, n, cvt},
                                F16Pages<128, Cvt>{vpages, n, cvt}, scale, scores, out, reduce);
  __builtin_trap();  // callers ask attend_pages_supported first
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail

// Defines softmax_SFX, silu_mul_SFX, attend_SFX, attend_shared_SFX and
// attend_pages_SFX (kernel_table.hpp) in namespace detail from the W-lane
// templates, dot_f32_SFX / axpy_SFX, reduce_stripes (16 / W vectors of dot
// stripes to dot_f32_SFX's sum) and cvt_halves (W f16 at a pointer to W
// floats).
#define EPYCTUNE_VEC_MATH_DEFINE(sfx, W, reduce_stripes, cvt_halves)                             \
  void softmax_##sfx(float* x, int64_t n) {                                                      \
    softmax_lanes<W>(x, n);                                                                      \
  }                                                                                              \
  void silu_mul_##sfx(float* gate_inout, const float* up, int64_t n) {                           \
    silu_mul_lanes<W>(gate_inout, up, n);                                                        \
  }                                                                                              \
  void attend_##sfx(const float* q, const float* keys, const float* vals, int64_t n, int64_t hd, \
                    float scale, float* scores, float* out) {                                    \
    attend_lanes<W>(q, keys, vals, n, hd, scale, scores, out, dot_f32_##sfx, axpy_##sfx);        \
  }                                                                                              \
  void attend_shared_##sfx(const float* const* q, const int64_t* ns, int nq, const float* keys,  \
                           const float* vals, int64_t hd, float scale, float* scores,            \
                           float* const* out) {                                                  \
    attend_shared_lanes<W>(q, ns, nq, keys, vals, hd, scale, scores, out, dot_f32_##sfx,         \
                           axpy_##sfx, reduce_stripes);                                          \
  }                                                                                              \
  void attend_pages_##sfx(const float* const* q, const int64_t* ns, int nq,                      \
                          const uint16_t* const* kpages, const uint16_t* const* vpages,          \
                          int64_t hd, float scale, float* scores, float* const* out) {           \
    attend_pages_lanes<W>(q, ns, nq, kpages, vpages, hd, scale, scores, out, reduce_stripes,     \
                          cvt_halves);                                                           \
  }
