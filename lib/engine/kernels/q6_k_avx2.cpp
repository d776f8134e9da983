// AVX2 Q6_K matmul (Q4_K: q4_k_avx2.cpp). A super-block is unpacked once into an aligned
// buffer of int16 q * sub-block-scale; per token, vpmaddwd over 16-element
// halves gives the scalar reference's int32 lanes 0..7 (first half of each
// 32-element chunk) and 8..15 (second half). Up to 4 tokens per weight pass.
#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/q6_k_unpack.hpp"
#include "engine/kernels/tile_driver.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

constexpr int kMaxTokens = 4;

inline float reduce16(__m256 lo, __m256 hi) {
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}
struct KBlock {
  alignas(32) int16_t w[256];  // q * scale, natural element order
  float dw;
};

// 32 bytes of u8/s8 values (as int8) -> two ymm of int16, times scale(s).
inline void widen_store(__m256i bytes, bool is_signed, __m256i s_lo, __m256i s_hi, int16_t* dst) {
  const __m128i b0 = _mm256_castsi256_si128(bytes), b1 = _mm256_extracti128_si256(bytes, 1);
  const __m256i lo = is_signed ? _mm256_cvtepi8_epi16(b0) : _mm256_cvtepu8_epi16(b0);
  const __m256i hi = is_signed ? _mm256_cvtepi8_epi16(b1) : _mm256_cvtepu8_epi16(b1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(dst), _mm256_mullo_epi16(lo, s_lo));
  _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 16), _mm256_mullo_epi16(hi, s_hi));
}

inline void load_block(const uint8_t* p, KBlock& kb) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
  q6_k_for_each_chunk(
      b, [&](int c, __m256i q) __attribute__((always_inline)) {
        widen_store(q, true, _mm256_set1_epi16(b.scales[2 * c]),
                    _mm256_set1_epi16(b.scales[2 * c + 1]), kb.w + 32 * c);
      });
  kb.dw = _cvtsh_ss(b.d);
}

template <int T>
void row_tile(const uint8_t* row, int64_t nsb, const uint8_t* const* arows, float* out) {
  constexpr size_t kBytes = sizeof(BlockQ6_K);
  __m256 acc[T][2];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  KBlock kb;
  for (int64_t b = 0; b < nsb; ++b) {
    load_block(row + static_cast<size_t>(b) * kBytes, kb);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + static_cast<size_t>(b) * kKBlockBytes;
      const auto* a = reinterpret_cast<const __m256i*>(rec);
      const auto* w = reinterpret_cast<const __m256i*>(kb.w);
      __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        lo = _mm256_add_epi32(
            lo, _mm256_madd_epi16(_mm256_load_si256(w + 2 * c), _mm256_load_si256(a + 2 * c)));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_load_si256(w + 2 * c + 1),
                                                    _mm256_load_si256(a + 2 * c + 1)));
      }
      const float da = *reinterpret_cast<const float*>(rec + kKBlockD);
      const __m256 s = _mm256_set1_ps(kb.dw * da);
      acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), s, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), s, acc[t][1]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t] = reduce16(acc[t][0], acc[t][1]);
}

void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  drive_tiles<kMaxTokens, uint8_t>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* row, const uint8_t* const* rows, float* out) {
        row_tile<decltype(T)::value>(row, nsb, rows, out);
      });
}

}  // namespace

void fill_avx2_table_q6_k(MatmulTable& t) {
  t.q6_k = matmul;
}

}  // namespace epyctune::engine::kernels::detail
