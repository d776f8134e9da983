// The rewrites of convert_matmul.cpp with AVX2 expanders: the same bytes as
// ExpandScalar (integer shuffles and masks), a few instructions per block.
#include <immintrin.h>

#include "engine/kernels/convert_rows.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

struct ExpandAvx2 {
  // Byte j of the result: 0xFF where bit j of the 32-bit word h is set.
  static __m256i bits_to_bytes(uint32_t h) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  }
  // Low nibbles (elements 0-15) in the low lane, high nibbles (16-31) above.
  static __m256i nibbles(const uint8_t* qs) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
  }
  static void q5(const uint8_t* qs, const uint8_t* qh, int bias, int8_t* out) {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    const __m256i hi = _mm256_and_si256(bits_to_bytes(h), _mm256_set1_epi8(0x10));
    const __m256i q = _mm256_or_si256(nibbles(qs), hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm256_sub_epi8(q, _mm256_set1_epi8(static_cast<char>(bias))));
  }
  static void mxfp4(const uint8_t* qs, int8_t* out) {
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_shuffle_epi8(lut, nibbles(qs)));
  }
  static void q5k_high(const uint8_t* qh, uint8_t* out) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
    const __m256i one = _mm256_set1_epi8(1), two = _mm256_set1_epi8(2);
    for (int c = 0; c < 4; ++c) {
      // 16-bit shifts: the masks keep each byte's own bits.
      const __m256i t = _mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * c));
      const __m256i b0 = _mm256_slli_epi16(_mm256_and_si256(t, one), 3);
      const __m256i b1 = _mm256_slli_epi16(_mm256_and_si256(t, two), 6);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * c), _mm256_or_si256(b0, b1));
    }
  }
};

}  // namespace

void convert_rows_avx2(GgmlType wtype, const uint8_t* w, size_t row_bytes, int64_t r, int64_t n,
                       int64_t nb, uint8_t* out0, uint8_t* out1, size_t out_row, bool* exact) {
  convert_rows<ExpandAvx2>(wtype, w, row_bytes, r, n, nb, Sink{out0, out_row}, Sink{out1, out_row},
                           exact);
}

}  // namespace epyctune::engine::kernels::detail
