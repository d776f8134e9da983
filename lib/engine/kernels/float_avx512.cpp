// AVX-512 kernels for F32 / F16 / BF16 weights against f32 activations. Lane i
// of the zmm accumulator is the scalar reference's stripe i (elements
// i, i+16, ...); the tail is masked, so the order is exactly the reference's.
#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/float_matmul.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/reduce_avx512.hpp"
#include "engine/kernels/vec_math.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

constexpr int kMaxTokens = 8;

using F = FloatWeights;

template <F kF>
inline __m512 load_w(const uint8_t* row, int64_t i, __mmask16 m) {
  if constexpr (kF == F::f32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  } else if constexpr (kF == F::f16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <F kF, int T>
void row_tile(const uint8_t* row, int64_t k, const float* const* x, float* out) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m512 w = load_w<kF>(row, i, 0xFFFF);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x[t] + i), acc[t]);
  }
  if (i < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1u);
    const __m512 w = load_w<kF>(row, i, m);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_mask3_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x[t] + i), acc[t], m);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = reduce16_zmm(acc[t]);
}

struct Tile {
  template <F kF, int T>
  static void run(const uint8_t* row, int64_t k, const float* const* x, float* out) {
    row_tile<kF, T>(row, k, x, out);
  }
};

}  // namespace

// Lane j is the reference's stripe j; a masked tail leaves the other
// stripes untouched, as the reference does.
float dot_f32_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    acc = _mm512_mask_add_ps(
        acc, m, acc,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
  return reduce16_zmm(acc);
}

void axpy_avx512(float* y, float a, const float* x, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(
        y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_mul_ps(va, _mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i),
                                        _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, x + i))));
  }
}

EPYCTUNE_VEC_MATH_DEFINE(
    avx512, 16, [](const F16* a) { return reduce16_zmm(a[0]); },
    [](const uint16_t* p) -> F16 {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    })

void fill_avx512_table_float(MatmulTable& t) {
  fill_float_entries<Tile, kMaxTokens>(t);
}

}  // namespace epyctune::engine::kernels::detail
