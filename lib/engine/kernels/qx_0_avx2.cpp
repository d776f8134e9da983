// AVX2 Q4_0 / Q8_0 matmul. The same 16-block groups as the AVX-512 kernel,
// handled as two halves of 8 blocks: ymm int32 lane L accumulates block L's
// whole dot product (vpmaddubsw + vpmaddwd), and the two float accumulators are
// the scalar reference's stripes 0..7 and 8..15. Up to 4 tokens per pass over
// the weights.
#include <immintrin.h>

#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tile_driver.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

constexpr int kMaxTokens = 4;

// The canonical reduce16 tree on stripes 0..7 (lo) and 8..15 (hi).
inline float reduce(__m256 lo, __m256 hi) {
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

// z[i] lane L = dword i of the 16 bytes at base + L * stride (L = 0..7).
inline void transpose8x4(const uint8_t* base, size_t stride, __m256i z[4]) {
  __m256i p[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + j * stride));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + (j + 4) * stride));
    p[j] = _mm256_inserti128_si256(_mm256_zextsi128_si256(lo), hi, 1);
  }
  const __m256i t0 = _mm256_unpacklo_epi32(p[0], p[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(p[0], p[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(p[2], p[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(p[2], p[3]);
  z[0] = _mm256_unpacklo_epi64(t0, t2);
  z[1] = _mm256_unpackhi_epi64(t0, t2);
  z[2] = _mm256_unpacklo_epi64(t1, t3);
  z[3] = _mm256_unpackhi_epi64(t1, t3);
}

struct Half {
  __m256i w[8];  // Q4: nibbles; Q8: |q|
  __m256i q[8];  // Q8: signed quants (sign source)
  __m256 dw;
};

template <bool kQ4>
inline void load_half(const uint8_t* base, Half& h) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const __m256i offs = _mm256_setr_epi32(0, kBytes, 2 * kBytes, 3 * kBytes, 4 * kBytes, 5 * kBytes,
                                         6 * kBytes, 7 * kBytes);
  const __m256i d32 = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), offs, 1);
  const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0,
                                        1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i d16 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(d32, pick), 0x08);
  h.dw = _mm256_cvtph_ps(_mm256_castsi256_si128(d16));
  if constexpr (kQ4) {
    __m256i z[4];
    transpose8x4(base + 2, kBytes, z);
    const __m256i m = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      h.w[i] = _mm256_and_si256(z[i], m);
      h.w[i + 4] = _mm256_and_si256(_mm256_srli_epi16(z[i], 4), m);
    }
  } else {
    transpose8x4(base + 2, kBytes, h.q);
    transpose8x4(base + 18, kBytes, h.q + 4);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) h.w[i] = _mm256_abs_epi8(h.q[i]);
  }
}

// Exact int32 dot product per block (lane); a points at the half's first lane
// in row 0 of the record (rows are 64 bytes apart).
template <bool kQ4>
inline __m256i half_dot(const Half& h, const uint8_t* a, const uint8_t* corr) {
  auto ld = [&](int i) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(a + 64 * i)); };
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kQ4) {
    // |pair| <= 2 * 15 * 127, so eight of them still fit int16.
    __m256i s16 = _mm256_maddubs_epi16(h.w[0], ld(0));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(h.w[i], ld(i)));
    return _mm256_add_epi32(_mm256_madd_epi16(s16, ones),
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(corr)));
  } else {
    __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i p = _mm256_maddubs_epi16(h.w[i], _mm256_sign_epi8(ld(i), h.q[i]));
      s[i % 2] = _mm256_add_epi32(s[i % 2], _mm256_madd_epi16(p, ones));
    }
    return _mm256_add_epi32(s[0], s[1]);
  }
}

template <bool kQ4, int T>
void row_tile(const uint8_t* row, int64_t nb, const uint8_t* const* arows, float* out) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  __m256 acc[T][2];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const int64_t ng = (nb + 15) / 16;
  Half h;
  alignas(32) uint8_t buf[16 * kBytes];
  for (int64_t g = 0; g < ng; ++g) {
    const int rest = static_cast<int>(nb - 16 * g < 16 ? nb - 16 * g : 16);
    const uint8_t* base = row + static_cast<size_t>(g) * 16 * kBytes;
    if (rest < 16) {  // short last group: zero-padded copy, dead lanes blended out
      std::memset(buf, 0, sizeof(buf));
      std::memcpy(buf, base, static_cast<size_t>(rest) * kBytes);
      base = buf;
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      if (8 * half >= rest) break;
      load_half<kQ4>(base + 8 * half * kBytes, h);
      const int live = rest - 8 * half;
      const __m256 keep = _mm256_castsi256_ps(
          _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* rec = arows[t] + static_cast<size_t>(g) * kQ8GroupBytes;
        const __m256i p = half_dot<kQ4>(h, rec + 32 * half, rec + kQ8GroupCorr + 32 * half);
        const __m256 s = _mm256_mul_ps(
            h.dw, _mm256_load_ps(reinterpret_cast<const float*>(rec + kQ8GroupD) + 8 * half));
        const __m256 next = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[t][half]);
        acc[t][half] = live >= 8 ? next : _mm256_blendv_ps(acc[t][half], next, keep);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) out[t] = reduce(acc[t][0], acc[t][1]);
}

template <bool kQ4>
void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  drive_tiles<kMaxTokens, uint8_t>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* row, const uint8_t* const* rows, float* out) {
        row_tile<kQ4, decltype(T)::value>(row, nb, rows, out);
      });
}

}  // namespace

void fill_avx2_table_qx_0(MatmulTable& t) {
  t.q4_0 = matmul<true>;
  t.q8_0 = matmul<false>;
}

}  // namespace epyctune::engine::kernels::detail
