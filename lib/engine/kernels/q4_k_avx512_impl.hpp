// AVX-512 Q4_K matmul, included by q4_k_avx512.cpp (vpmaddubsw) and
// q4_k_avx512vnni.cpp (vpdpbusd). Two super-blocks are transposed so that
// int32 lane L holds sub-block L % 8 of super-block L / 8 whole: 8 u8 x s8
// dot-product instructions per 512 weights and token, then one fma by the
// lane's scale and one by its min. Lanes are the scalar reference's
// stripes (ref_matmul.cpp). Up to 8 tokens per pass over the weights.
#pragma once

#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/reduce_avx512.hpp"
#include "engine/kernels/tile_driver.hpp"

namespace epyctune::engine::kernels::detail::avx512q4k {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

constexpr int kMaxTokens = 8;

struct Pair {
  __m512i w[8];   // row i, lane L: nibbles 4i..4i+3 of lane L's sub-block
  __m512 ws, wm;  // per-lane fp32(d) * scale, fp32(dmin) * min (exact)
};

[[gnu::always_inline]] inline void load_pair(const BlockQ4_K& b0, const BlockQ4_K& b1, Pair& p) {
  // Dwords of the 4 chunks (32 qs bytes each) of both super-blocks.
  const __m512i y0 = _mm512_loadu_si512(b0.qs), y1 = _mm512_loadu_si512(b0.qs + 64);
  const __m512i y2 = _mm512_loadu_si512(b1.qs), y3 = _mm512_loadu_si512(b1.qs + 64);
  // e[h]: position 4i' + c = dword (4h + i') of chunk c.
  const __m512i ie0 = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
  const __m512i ie1 = _mm512_add_epi32(ie0, _mm512_set1_epi32(4));
  const __m512i e[2] = {_mm512_permutex2var_epi32(y0, ie0, y1),
                        _mm512_permutex2var_epi32(y0, ie1, y1)};
  const __m512i f[2] = {_mm512_permutex2var_epi32(y2, ie0, y3),
                        _mm512_permutex2var_epi32(y2, ie1, y3)};
  // o (rows i, i+1): [b0 chunks 0..3, b1 chunks 0..3] of dword i, then of i+1.
  const __m512i io0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i io1 = _mm512_add_epi32(io0, _mm512_set1_epi32(8));
  const __m512i ix0 = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i ix1 = _mm512_add_epi32(ix0, _mm512_set1_epi32(8));
  const __m512i shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i o = _mm512_permutex2var_epi32(e[k / 2], k % 2 ? io1 : io0, f[k / 2]);
    p.w[2 * k] = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(ix0, o), shift), m4);
    p.w[2 * k + 1] =
        _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(ix1, o), shift), m4);
  }
  uint64_t sc[2], mn[2];
  q4k_unpack_scales(b0.scales, sc[0], mn[0]);
  q4k_unpack_scales(b1.scales, sc[1], mn[1]);
  const __m512 dw = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(_cvtsh_ss(b0.d)),
                                         _mm512_set1_ps(_cvtsh_ss(b1.d)));
  const __m512 dmin = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(_cvtsh_ss(b0.dmin)),
                                           _mm512_set1_ps(_cvtsh_ss(b1.dmin)));
  p.ws = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x(
                           static_cast<int64_t>(sc[1]), static_cast<int64_t>(sc[0])))),
                       dw);
  p.wm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x(
                           static_cast<int64_t>(mn[1]), static_cast<int64_t>(mn[0])))),
                       dmin);
}

template <bool kVnni>
[[gnu::always_inline]] inline __m512i pair_dot(const Pair& p, const uint8_t* rec) {
  auto a = [&](int i) { return _mm512_load_si512(rec + 64 * i); };
  if constexpr (kVnni) {
    __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) s[i % 2] = _mm512_dpbusd_epi32(s[i % 2], p.w[i], a(i));
    return _mm512_add_epi32(s[0], s[1]);
  } else {
    // |pair| <= 2 * 15 * 127, so eight of them still fit int16.
    __m512i s16 = _mm512_maddubs_epi16(p.w[0], a(0));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(p.w[i], a(i)));
    return _mm512_madd_epi16(s16, _mm512_set1_epi16(1));
  }
}

template <bool kVnni, int T>
void row_tile(const uint8_t* row, int64_t nsb, const uint8_t* const* arows, float* out) {
  static const BlockQ4_K kZero{};
  const auto* blk = reinterpret_cast<const BlockQ4_K*>(row);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t np = (nsb + 1) / 2;
  Pair p;
  for (int64_t m = 0; m < np; ++m) {
    const bool full = 2 * m + 1 < nsb;
    load_pair(blk[2 * m], full ? blk[2 * m + 1] : kZero, p);
    const __mmask16 live = full ? 0xFFFF : 0x00FF;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + static_cast<size_t>(m) * kQ4KPairBytes;
      const __m512 dot = _mm512_cvtepi32_ps(pair_dot<kVnni>(p, rec));
      const __m512 bs = _mm512_load_ps(rec + kQ4KPairBsum);
      const __m512 da = _mm512_load_ps(rec + kQ4KPairD);
      acc[t] = _mm512_mask3_fmadd_ps(dot, _mm512_mul_ps(p.ws, da), acc[t], live);
      acc[t] = _mm512_mask3_fnmadd_ps(bs, _mm512_mul_ps(p.wm, da), acc[t], live);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = reduce16_zmm(acc[t]);
}

template <bool kVnni>
void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  drive_tiles<kMaxTokens, uint8_t>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* row, const uint8_t* const* rows, float* out) {
        row_tile<kVnni, decltype(T)::value>(row, nsb, rows, out);
      });
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512q4k
