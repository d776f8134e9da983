// AVX-512 kernels for F32 / F16 / BF16 weights against f32 activations: the
// 16-lane Isa of float_tiles.hpp (lane i of the zmm accumulator is the scalar
// reference's stripe i; the tail is masked), attention's dot_f32 / axpy, and
// the 16-lane vec_math.hpp copies.
#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/float_tiles.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/reduce_avx512.hpp"
#include "engine/kernels/vec_math.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kMaxTokens = 8;
  static __mmask16 first(int n) {
    return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  }
  static V zero() { return _mm512_setzero_ps(); }
  template <FloatType kF>
  static V load_w(const uint8_t* row, int64_t i, int n) {
    const __mmask16 m = first(n);
    if constexpr (kF == FloatType::f32) {
      return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
    } else if constexpr (kF == FloatType::f16) {
      return _mm512_cvtph_ps(
          _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i));
    } else {
      const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
  static V load_x(const float* p, int n) {
    return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(first(n), p);
  }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fma_first(V a, V b, V c, int n) { return _mm512_mask3_fmadd_ps(a, b, c, first(n)); }
  static float reduce(const V acc[1]) { return reduce16_zmm(acc[0]); }
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

EPYCTUNE_VEC_MATH_DEFINE(avx512, 16)

void fill_avx512_table_float(MatmulTable& t) {
  fill_float_table<Avx512>(t);
}

}  // namespace epyctune::engine::kernels::detail
