// AVX2 kernels for F32 / F16 / BF16 weights against f32 activations: the
// 8-lane Isa of float_tiles.hpp (two ymm accumulators are the scalar
// reference's stripes 0..7 and 8..15; the tail uses masked loads and blends),
// attention's dot_f32 / axpy, and the 8-lane vec_math.hpp copies.
#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/float_tiles.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/vec_math.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

inline float reduce_ymm(__m256 lo, __m256 hi) {
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

// Lanes < n set (all 32 bits), as maskload and blendv take them.
inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

struct Avx2 {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kMaxTokens = 4;
  static V zero() { return _mm256_setzero_ps(); }
  template <FloatType kF>
  static V load_w(const uint8_t* row, int64_t i, int n) {
    if constexpr (kF == FloatType::f32) {
      return load_x(reinterpret_cast<const float*>(row) + i, n);
    } else {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + i;
      __m128i h;
      if (n >= 8) {
        h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      } else {
        alignas(16) uint16_t tmp[8] = {};
        for (int j = 0; j < n; ++j) tmp[j] = p[j];
        h = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
      }
      if constexpr (kF == FloatType::f16) return _mm256_cvtph_ps(h);
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
  static V load_x(const float* p, int n) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_lanes(n));
  }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fma_first(V a, V b, V c, int n) {
    return _mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), _mm256_castsi256_ps(first_lanes(n)));
  }
  static float reduce(const V acc[2]) { return reduce_ymm(acc[0], acc[1]); }
};

}  // namespace

// Stripes 0..7 and 8..15 in lo and hi. The tail's missing elements are
// zeros, and adding +0 never changes a stripe: it starts at +0 and, rounding
// to nearest, a sum is -0 only when both terms are.
float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8)));
  }
  if (i < n) {
    const int r = static_cast<int>(n - i);
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(r), idx);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(r - 8), idx);
    lo = _mm256_add_ps(lo,
                       _mm256_mul_ps(_mm256_maskload_ps(a + i, m0), _mm256_maskload_ps(b + i, m0)));
    if (r > 8)
      hi = _mm256_add_ps(
          hi, _mm256_mul_ps(_mm256_maskload_ps(a + i + 8, m1), _mm256_maskload_ps(b + i + 8, m1)));
  }
  return reduce_ymm(lo, hi);
}

void axpy_avx2(float* y, float a, const float* x, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] += a * x[i];
}

EPYCTUNE_VEC_MATH_DEFINE(avx2, 8)

void fill_avx2_table_float(MatmulTable& t) {
  fill_float_table<Avx2>(t);
}

}  // namespace epyctune::engine::kernels::detail
