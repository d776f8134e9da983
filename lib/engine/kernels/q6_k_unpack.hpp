// The 6-bit quants of a Q6_K super-block as signed bytes, shared by the AVX2
// kernel and the AVX-512 super-block unpack (both TUs have AVX2). Each then
// widens them to int16 and applies the sub-block scales its own way.
#pragma once

#include <immintrin.h>

#include "engine/kernels/blocks.hpp"

namespace epyctune::engine::kernels::detail {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

// Half n (elements 128n..128n+127) of b: q[g] holds q - 32 for elements
// 128n + 32g .. +31, as ggml's dequantize_row_q6_K orders them (low nibbles
// of ql[64n..] for g = 0, 1, high nibbles for g = 2, 3; two bits of qh each).
[[gnu::always_inline]] inline void q6_k_unpack_half(const BlockQ6_K& b, int n, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  const __m256i k32 = _mm256_set1_epi8(32);
  const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * n));
  const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * n + 32));
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * n));
  auto high = [&](int shift) {
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, shift), m2), 4);
  };
  q[0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l0, m4), high(0)), k32);
  q[1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l1, m4), high(2)), k32);
  q[2] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), high(4)),
                         k32);
  q[3] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), high(6)),
                         k32);
}

// fn(c, q) for the eight 32-element chunks c of b in order, q holding the
// chunk's quants - 32 as signed bytes; chunk c takes scales 2c and 2c + 1.
template <class Fn>
[[gnu::always_inline]] inline void q6_k_for_each_chunk(const BlockQ6_K& b, Fn&& fn) {
#pragma GCC unroll 2
  for (int n = 0; n < 2; ++n) {
    __m256i q[4];
    q6_k_unpack_half(b, n, q);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) fn(4 * n + g, q[g]);
  }
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail
