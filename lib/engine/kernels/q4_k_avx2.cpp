// AVX2 Q4_K matmul on ggml rows, the AVX-512 kernel's 16-row tiles at half
// the width (q4_k_avx512_impl.hpp): ymm lane L is row L of an 8-row tile. A
// super-block of the 8 rows is transposed into a buffer (vector q lane L =
// dword q of row L's block, as in the packed16 panels), then each sub-block
// is 8 weight vectors against a token's broadcast activation dwords
// (vpmaddubsw + vpmaddwd), one fma by the rows' scales and one by their
// mins, and the activations' scale once per super-block: each lane's chain
// is the scalar reference's per-row sum. Up to 4
// tokens per pass over the weights.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

constexpr int kMaxTokens = 4;
constexpr int64_t kTileRows = 8;
constexpr int kDwords = sizeof(BlockQ4_K) / 4;  // 36

// z[i] lane L = dword i of the 16 bytes at rows[L] + off (L = 0..7).
inline void transpose8x4(const uint8_t* const* rows, size_t off, __m256i z[4]) {
  __m256i p[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + off));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 4] + off));
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

// The low 16 bits of each dword, as fp16 -> fp32.
inline __m256 half_to_float(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

template <int T>
void rows_tile(const uint8_t* const* rows, int64_t nsb, const uint8_t* const* arows, __m256* acc) {
  alignas(32) __m256i v[kDwords];
  const __m256i m63 = _mm256_set1_epi32(63), m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3),
                m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nsb; ++b) {
    const size_t off = static_cast<size_t>(b) * sizeof(BlockQ4_K);
    for (int m = 0; m < kDwords / 4; ++m)
      transpose8x4(rows, off + 16 * static_cast<size_t>(m), v + 4 * m);
    const __m256 d = half_to_float(v[0]);
    const __m256 dmin = half_to_float(_mm256_srli_epi32(v[0], 16));
    const size_t rec_off = static_cast<size_t>(b / 2) * kQ4KPairBytes;
    __m256 sb[T];
    for (auto& x : sb) x = _mm256_setzero_ps();
    for (int j = 0; j < 8; ++j) {
      __m256i sc, mn;
      if (j < 4) {
        const __m128i s = _mm_cvtsi32_si128(8 * j);
        sc = _mm256_and_si256(_mm256_srl_epi32(v[1], s), m63);
        mn = _mm256_and_si256(_mm256_srl_epi32(v[2], s), m63);
      } else {
        const int jj = j - 4;
        const __m128i s = _mm_cvtsi32_si128(8 * jj), s4 = _mm_cvtsi32_si128(8 * jj + 4),
                      s6 = _mm_cvtsi32_si128(8 * jj + 6);
        sc =
            _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(v[3], s), m15),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(v[1], s6), m3), 4));
        mn =
            _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(v[3], s4), m15),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(v[2], s6), m3), 4));
      }
      const __m256 ws = _mm256_mul_ps(_mm256_cvtepi32_ps(sc), d);
      const __m256 wm = _mm256_mul_ps(_mm256_cvtepi32_ps(mn), dmin);
      __m256i w[8];
      const __m128i shift = _mm_cvtsi32_si128(4 * (j % 2));
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i)
        w[i] = _mm256_and_si256(_mm256_srl_epi16(v[4 + 8 * (j / 2) + i], shift), m4);
      const int L = static_cast<int>(8 * (b % 2)) + j;
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* rec = arows[t] + rec_off;
        auto bc = [&](int i) {
          int32_t x;
          std::memcpy(&x, rec + 4 * L + 64 * i, 4);
          return _mm256_set1_epi32(x);
        };
        // |pair| <= 2 * 15 * 128, so eight of them still fit int16.
        __m256i s16 = _mm256_maddubs_epi16(w[0], bc(0));
#pragma GCC unroll 8
        for (int i = 1; i < 8; ++i) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[i], bc(i)));
        float bs;
        std::memcpy(&bs, rec + kQ4KPairBsum + 4 * L, 4);
        sb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones)), ws, sb[t]);
        sb[t] = _mm256_fnmadd_ps(_mm256_set1_ps(bs), wm, sb[t]);
      }
    }
    for (int t = 0; t < T; ++t) {
      float da;
      std::memcpy(&da, arows[t] + rec_off + kQ4KPairD + 4 * (8 * (b % 2)), 4);
      acc[t] = _mm256_fmadd_ps(sb[t], _mm256_set1_ps(da), acc[t]);
    }
  }
}

void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const int64_t live = std::min(kTileRows, r1 - r);
    const uint8_t* rows[kTileRows];
    for (int64_t L = 0; L < kTileRows; ++L)
      rows[L] = w + static_cast<size_t>(r + std::min(L, live - 1)) * w_row_bytes;
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(live)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int t0 = 0; t0 < acts.n_tokens; t0 += kMaxTokens) {
      const int nt = std::min(acts.n_tokens - t0, kMaxTokens);
      const uint8_t* arows[kMaxTokens];
      for (int t = 0; t < nt; ++t) arows[t] = acts.row(t0 + t);
      __m256 acc[kMaxTokens];
      for (auto& a : acc) a = _mm256_setzero_ps();
      switch (nt) {
        case 1:
          rows_tile<1>(rows, nsb, arows, acc);
          break;
        case 2:
          rows_tile<2>(rows, nsb, arows, acc);
          break;
        case 3:
          rows_tile<3>(rows, nsb, arows, acc);
          break;
        default:
          rows_tile<4>(rows, nsb, arows, acc);
      }
      for (int t = 0; t < nt; ++t) _mm256_maskstore_ps(y + (t0 + t) * ldy + r, keep, acc[t]);
    }
  }
}

}  // namespace

void fill_avx2_table_q4_k(MatmulTable& t) {
  t.q4_k = matmul;
}

}  // namespace epyctune::engine::kernels::detail
