// AVX2 version of the activation quantizer in prepare_acts.cpp. Same
// operations in the same precision (max of |x| is exact in any order; mul,
// round-to-nearest-even, clamp and conversion are elementwise), so the bytes
// equal the scalar ones. Operand order of max/min follows the scalar
// std::max/std::min, so even a NaN input maps to the same value (-127).
#include <immintrin.h>

#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

inline float group_amax(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 8)
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ps(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

// Eight quantized values of x[0..8) as int32.
inline __m256i q8(const float* x, __m256 id) {
  __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), id),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_max_ps(v, _mm256_set1_ps(-127.0f));
  v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(v);
}

}  // namespace

float quantize_group_i8_avx2(const float* x, int n, int8_t* q) {
  const float amax = group_amax(x, n);
  const float d = amax / 127.0f;
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  for (int j = 0; j < n; j += 32) {
    const __m256i w01 =
        _mm256_permute4x64_epi64(_mm256_packs_epi32(q8(x + j, id), q8(x + j + 8, id)), 0xD8);
    const __m256i w23 =
        _mm256_permute4x64_epi64(_mm256_packs_epi32(q8(x + j + 16, id), q8(x + j + 24, id)), 0xD8);
    const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi16(w01, w23), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), b);
  }
  return d;
}

float quantize_group_i16_avx2(const float* x, int n, int16_t* q) {
  const float amax = group_amax(x, n);
  const float d = amax / 127.0f;
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  for (int j = 0; j < n; j += 16) {
    const __m256i w =
        _mm256_permute4x64_epi64(_mm256_packs_epi32(q8(x + j, id), q8(x + j + 8, id)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), w);
  }
  return d;
}

}  // namespace epyctune::engine::kernels::detail
