// AVX-512 Q4_0 / Q8_0 matmul, included by qx_0_avx512.cpp (BW: vpmaddubsw)
// and qx_0_avx512vnni.cpp (vpdpbusd). Sixteen weight blocks are transposed so
// that int32 lane L accumulates block L's whole dot product: 8 dot-product
// instructions per 16 blocks and token, no horizontal sums, and the lanes are
// exactly the scalar reference's 16 stripes (acc[b % 16]). The unpacked group
// stays in registers across up to 8 tokens, so a token batch reads the weights
// once.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/reduce_avx512.hpp"
#include "engine/kernels/tile_driver.hpp"

namespace epyctune::engine::kernels::detail::avx512 {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

constexpr int kMaxTokens = 8;
constexpr int64_t kPrefetchGroups = 4;  // ~1.1 KiB (Q4_0) ahead

// z[i] lane L = dword i of the 16 bytes at base + L * stride (i = 0..3).
[[gnu::always_inline]] inline void transpose16x4(const uint8_t* base, size_t stride, __m512i z[4]) {
  __m512i p[4];
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j) {
    auto ld = [&](int L) {
      return _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(base + static_cast<size_t>(L) * stride));
    };
    __m512i v = _mm512_zextsi128_si512(ld(j));
    v = _mm512_inserti32x4(v, ld(j + 4), 1);
    v = _mm512_inserti32x4(v, ld(j + 8), 2);
    p[j] = _mm512_inserti32x4(v, ld(j + 12), 3);
  }
  // 128-bit lane c of p[j] holds block 4c + j; a 4x4 dword transpose per lane
  // puts block 4c + j's dword i at dword 4c + j of z[i].
  const __m512i t0 = _mm512_unpacklo_epi32(p[0], p[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(p[0], p[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(p[2], p[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(p[2], p[3]);
  z[0] = _mm512_unpacklo_epi64(t0, t2);
  z[1] = _mm512_unpackhi_epi64(t0, t2);
  z[2] = _mm512_unpacklo_epi64(t1, t3);
  z[3] = _mm512_unpackhi_epi64(t1, t3);
}

struct Group {
  __m512i w[8];      // unsigned operand: Q4 nibbles; Q8 quants xor 0x80 (VNNI) or |q|
  __mmask64 neg[8];  // Q8 without VNNI: bytes whose weight is negative
  __m512 dw;         // per-lane block scale
};

template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline void load_group(const uint8_t* base, Group& g) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const __m512i offs =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(kBytes)));
  const __m512i d32 = _mm512_i32gather_epi32(offs, base, 1);  // low half = fp16 d
  g.dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d32));
  if constexpr (kQ4) {
    __m512i z[4];
    transpose16x4(base + 2, kBytes, z);
    const __m512i m = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      g.w[i] = _mm512_and_si512(z[i], m);
      g.w[i + 4] = _mm512_and_si512(_mm512_srli_epi16(z[i], 4), m);
    }
  } else {
    transpose16x4(base + 2, kBytes, g.w);
    transpose16x4(base + 18, kBytes, g.w + 4);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      if constexpr (kVnni) {
        g.w[i] = _mm512_xor_si512(g.w[i], _mm512_set1_epi8(static_cast<char>(0x80)));
      } else {
        g.neg[i] = _mm512_movepi8_mask(g.w[i]);
        g.w[i] = _mm512_abs_epi8(g.w[i]);
      }
    }
  }
}

// The same group from packed16 rows (blocks.hpp): the bytes are already in
// lane order, so a group is a handful of plain loads. rest < 16: the row's
// short last group (lanes >= rest load as zero).
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline void load_group_packed(const uint8_t* base, Group& g, int rest = 16) {
  const __mmask16 live = static_cast<__mmask16>((1u << rest) - 1u);
  const size_t n = static_cast<size_t>(rest);
  const auto d = rest == 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base))
                            : _mm256_maskz_loadu_epi16(live, base);
  g.dw = _mm512_cvtph_ps(d);
  auto ld = [&](int i) {
    const uint8_t* p = base + 2 * n + 4 * n * static_cast<size_t>(i);
    return rest == 16 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(live, p);
  };
  if constexpr (kQ4) {
    const __m512i m = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      const __m512i z = ld(i);
      g.w[i] = _mm512_and_si512(z, m);
      g.w[i + 4] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m);
    }
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      g.w[i] = ld(i);
      if constexpr (kVnni) {
        g.w[i] = _mm512_xor_si512(g.w[i], _mm512_set1_epi8(static_cast<char>(0x80)));
      } else {
        g.neg[i] = _mm512_movepi8_mask(g.w[i]);
        g.w[i] = _mm512_abs_epi8(g.w[i]);
      }
    }
  }
}

// Exact int32 dot product per block (lane) for one token's record.
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline __m512i group_dot(const Group& g, const uint8_t* rec) {
  auto a = [&](int i) { return _mm512_load_si512(rec + 64 * i); };
  const __m512i corr = _mm512_load_si512(rec + kQ8GroupCorr);
  if constexpr (kVnni) {
    // Two independent chains: integer sums are exact in any order.
    __m512i s[2] = {corr, _mm512_setzero_si512()};
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) s[i % 2] = _mm512_dpbusd_epi32(s[i % 2], g.w[i], a(i));
    return _mm512_add_epi32(s[0], s[1]);
  } else if constexpr (kQ4) {
    // |pair| <= 2 * 15 * 127, so eight of them still fit int16.
    __m512i s16 = _mm512_maddubs_epi16(g.w[0], a(0));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(g.w[i], a(i)));
    return _mm512_add_epi32(_mm512_madd_epi16(s16, _mm512_set1_epi16(1)), corr);
  } else {
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512i sa = _mm512_mask_sub_epi8(a(i), g.neg[i], _mm512_setzero_si512(), a(i));
      s = _mm512_add_epi32(
          s, _mm512_madd_epi16(_mm512_maddubs_epi16(g.w[i], sa), _mm512_set1_epi16(1)));
    }
    return s;
  }
}

// The blocks after the last full group of 16 (always in ggml's layout): copied
// into a zero-padded group whose missing lanes are masked out of acc.
template <bool kQ4, bool kVnni, int T>
[[gnu::always_inline]] inline void tail_group(const uint8_t* row, int64_t nb,
                                              const uint8_t* const* arows, __m512* acc) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const int64_t full = nb / 16;
  const int rest = static_cast<int>(nb - full * 16);
  if (rest == 0) return;
  alignas(64) uint8_t buf[16 * kBytes];
  std::memset(buf, 0, sizeof(buf));
  std::memcpy(buf, row + static_cast<size_t>(full) * 16 * kBytes,
              static_cast<size_t>(rest) * kBytes);
  Group g;
  load_group<kQ4, kVnni>(buf, g);
  const __mmask16 live = static_cast<__mmask16>((1u << rest) - 1u);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const uint8_t* rec = arows[t] + static_cast<size_t>(full) * kQ8GroupBytes;
    const __m512i p = group_dot<kQ4, kVnni>(g, rec);
    const __m512 s = _mm512_mul_ps(g.dw, _mm512_load_ps(rec + kQ8GroupD));
    acc[t] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(p), s, acc[t], live);
  }
}

template <bool kQ4, bool kVnni, int T>
void row_tile(const uint8_t* row, int64_t nb, const uint8_t* const* arows, float* out) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t full = nb / 16;
  Group g;
  for (int64_t gi = 0; gi < full; ++gi) {
    if constexpr (T > 1) {
      // With several tokens a group takes long enough to compute that the
      // hardware prefetcher falls behind; one token streams faster without
      // the hint (kernel-bench, 512 MiB: T=8 7.0 -> 10.5 GB/s, T=1 26 -> 22).
      const uint8_t* ahead = row + static_cast<size_t>(gi + kPrefetchGroups) * 16 * kBytes;
#pragma GCC unroll 8
      for (size_t off = 0; off < 16 * kBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    }
    load_group<kQ4, kVnni>(row + static_cast<size_t>(gi) * 16 * kBytes, g);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + static_cast<size_t>(gi) * kQ8GroupBytes;
      const __m512i p = group_dot<kQ4, kVnni>(g, rec);
      const __m512 s = _mm512_mul_ps(g.dw, _mm512_load_ps(rec + kQ8GroupD));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s, acc[t]);
    }
  }
  tail_group<kQ4, kVnni, T>(row, nb, arows, acc);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = reduce16_zmm(acc[t]);
}

template <bool kQ4, bool kVnni>
void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  drive_tiles<kMaxTokens, uint8_t>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* row, const uint8_t* const* rows, float* out) {
        row_tile<kQ4, kVnni, decltype(T)::value>(row, nb, rows, out);
      });
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512
