// AVX-512 Q6_K super-blocks, for the row-tile driver (packed_formats_avx512.hpp;
// vpmaddwd, or vpdpwssd with VNNI). Each super-block is unpacked once into
// eight zmm of int16 q * sub-block-scale; a token's int16 activations then
// take 8 multiply-adds per 256 elements, and int32 lane l collects exactly the
// scalar reference's lane l (elements with (i % 32) / 2 == l).
#pragma once

#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/q6_k_unpack.hpp"

namespace epyctune::engine::kernels::detail::avx512k {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

struct KBlock {
  __m512i w[8];  // int16 q * scale, chunk c = elements 32c..32c+31
  __m512 dw;     // fp32(d) broadcast
};

[[gnu::always_inline]] inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

[[gnu::always_inline]] inline void load_block(const uint8_t* p, KBlock& kb) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m512i sc = _mm512_zextsi256_si512(sc16);
  // idx for chunk c: [2c x16, 2c+1 x16]
  const __m512i idx0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
  q6_k_for_each_chunk(
      b, [&](int c, __m256i q) __attribute__((always_inline)) {
        const __m512i s = _mm512_permutexvar_epi16(
            _mm512_add_epi16(idx0, _mm512_set1_epi16(static_cast<int16_t>(2 * c))), sc);
        kb.w[c] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(q), s);
      });
  kb.dw = _mm512_set1_ps(half_to_float(b.d));
}

template <bool kVnni>
[[gnu::always_inline]] inline __m512i block_dot(const KBlock& kb, const uint8_t* rec) {
  auto a = [&](int c) { return _mm512_load_si512(rec + 64 * c); };
  __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    if constexpr (kVnni) {
      s[c % 2] = _mm512_dpwssd_epi32(s[c % 2], kb.w[c], a(c));
    } else {
      s[c % 2] = _mm512_add_epi32(s[c % 2], _mm512_madd_epi16(kb.w[c], a(c)));
    }
  }
  return _mm512_add_epi32(s[0], s[1]);
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512k
