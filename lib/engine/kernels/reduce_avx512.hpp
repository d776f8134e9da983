// The canonical reduce16 tree (blocks.hpp) on one zmm, shared by the AVX-512
// kernels so every one reduces its 16 stripes in exactly the same order.
#pragma once

#include <immintrin.h>

namespace epyctune::engine::kernels::detail {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

[[gnu::always_inline]] inline float reduce16_zmm(__m512 acc) {
  const __m256 lo = _mm512_castps512_ps256(acc);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail
