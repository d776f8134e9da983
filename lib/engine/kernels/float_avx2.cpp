// AVX2 kernels for F32 / F16 / BF16 weights against f32 activations. Two ymm
// accumulators are the scalar reference's stripes 0..7 and 8..15; the tail
// uses masked loads and blends, so the order is exactly the reference's.
#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/float_matmul.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/vec_math.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

constexpr int kMaxTokens = 4;

inline float reduce(__m256 lo, __m256 hi) {
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

using F = FloatWeights;

// Eight weights from element i; n < 8 loads only the first n (rest zero).
template <F kF>
inline __m256 load_w(const uint8_t* row, int64_t i, int n) {
  if constexpr (kF == F::f32) {
    const float* p = reinterpret_cast<const float*>(row) + i;
    if (n >= 8) return _mm256_loadu_ps(p);
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, m);
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
    if constexpr (kF == F::f16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

inline __m256 load_x(const float* p, int n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  const __m256i m =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_maskload_ps(p, m);
}

template <F kF, int T>
void row_tile(const uint8_t* row, int64_t k, const float* const* x, float* out) {
  __m256 acc[T][2];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256 w0 = load_w<kF>(row, i, 8), w1 = load_w<kF>(row, i + 8, 8);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      acc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), acc[t][1]);
    }
  }
  if (i < k) {
    const int rest = static_cast<int>(k - i);
    for (int h = 0; h < 2; ++h) {
      const int n = rest - 8 * h;
      if (n <= 0) break;
      const __m256 w = load_w<kF>(row, i + 8 * h, n);
      const __m256 keep = _mm256_castsi256_ps(
          _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 next = _mm256_fmadd_ps(w, load_x(x[t] + i + 8 * h, n), acc[t][h]);
        acc[t][h] = _mm256_blendv_ps(acc[t][h], next, keep);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t] = reduce(acc[t][0], acc[t][1]);
}

struct Tile {
  template <F kF, int T>
  static void run(const uint8_t* row, int64_t k, const float* const* x, float* out) {
    row_tile<kF, T>(row, k, x, out);
  }
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
  return reduce(lo, hi);
}

void axpy_avx2(float* y, float a, const float* x, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] += a * x[i];
}

EPYCTUNE_VEC_MATH_DEFINE(
    avx2, 8, [](const F8* a) { return reduce(a[0], a[1]); },
    [](const uint16_t* p) -> F8 {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    })

void fill_avx2_table_float(MatmulTable& t) {
  fill_float_entries<Tile, kMaxTokens>(t);
}

}  // namespace epyctune::engine::kernels::detail
