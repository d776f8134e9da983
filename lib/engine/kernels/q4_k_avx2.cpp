// AVX2 Q4_K matmul. A super-block is transposed so that int32 lane j holds its
// sub-block j whole (vpmaddubsw, vpmaddwd), then one fma by the lane's scale
// and one by its min; super-block b's lanes are the scalar reference's
// stripes 8 * (b % 2) + j. Up to 4 tokens per pass over the weights.
#include <immintrin.h>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
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

struct Block {
  __m256i w[8];   // row i, lane j: nibbles 4i..4i+3 of sub-block j
  __m256 ws, wm;  // per-lane fp32(d) * scale and fp32(dmin) * min (exact)
};

[[gnu::always_inline]] inline void load_block(const BlockQ4_K& b, Block& k) {
  __m256i c[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
    c[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * j));
  // 4x4 dword transposes per 128-bit lane: z[r] = [dword r of chunks 0..3 |
  // dword r + 4 of chunks 0..3].
  const __m256i t0 = _mm256_unpacklo_epi32(c[0], c[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(c[0], c[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(c[2], c[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(c[2], c[3]);
  const __m256i z[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                        _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
  // Lane j takes chunk j / 2's dword, nibble j % 2.
  const __m256i ilo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256i ihi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
  const __m256i shift = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    k.w[r] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_permutevar8x32_epi32(z[r], ilo), shift), m4);
    k.w[r + 4] =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_permutevar8x32_epi32(z[r], ihi), shift), m4);
  }
  uint64_t sc, mn;
  q4k_unpack_scales(b.scales, sc, mn);
  k.ws = _mm256_mul_ps(
      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(sc)))),
      _mm256_set1_ps(_cvtsh_ss(b.d)));
  k.wm = _mm256_mul_ps(
      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(mn)))),
      _mm256_set1_ps(_cvtsh_ss(b.dmin)));
}

template <int T>
void row_tile(const uint8_t* row, int64_t nsb, const uint8_t* const* arows, float* out) {
  const auto* blk = reinterpret_cast<const BlockQ4_K*>(row);
  __m256 acc[T][2];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  Block k;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nsb; ++b) {
    load_block(blk[b], k);
    const int h = static_cast<int>(b % 2);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + static_cast<size_t>(b / 2) * kQ4KPairBytes + 32 * h;
      auto a = [&](int i) {
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 64 * i));
      };
      // |pair| <= 2 * 15 * 127, so eight of them still fit int16.
      __m256i s16 = _mm256_maddubs_epi16(k.w[0], a(0));
#pragma GCC unroll 8
      for (int i = 1; i < 8; ++i) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(k.w[i], a(i)));
      const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
      const __m256 bs = _mm256_load_ps(reinterpret_cast<const float*>(rec + kQ4KPairBsum));
      const __m256 da = _mm256_load_ps(reinterpret_cast<const float*>(rec + kQ4KPairD));
      acc[t][h] = _mm256_fmadd_ps(p, _mm256_mul_ps(k.ws, da), acc[t][h]);
      acc[t][h] = _mm256_fnmadd_ps(bs, _mm256_mul_ps(k.wm, da), acc[t][h]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    out[t] = reduce16(acc[t][0], acc[t][1]);
  }
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

void fill_avx2_table_q4_k(MatmulTable& t) {
  t.q4_k = matmul;
}

}  // namespace epyctune::engine::kernels::detail
