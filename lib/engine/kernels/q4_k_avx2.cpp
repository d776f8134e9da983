// AVX2 Q4_K matmul on ggml rows, the AVX-512 kernel's 16-row tiles at half
// the width (q4_k_avx512_impl.hpp): ymm lane L is row L of an 8-row tile. A
// super-block of the 8 rows is transposed into a buffer (vector q lane L =
// dword q of row L's block, as in the packed16 panels), then each sub-block
// is 8 weight vectors against a token's broadcast activation dwords
// (vpmaddubsw + vpmaddwd) and one fma by the rows' scales; the mins' exact
// integer sum and the activations' scale go in once per super-block: each
// lane's chain is the scalar reference's per-row sum. Up to 4
// tokens per pass over the weights.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tiles8_avx2.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

using tiles8::transpose8x4;
constexpr int kDwords = sizeof(BlockQ4_K) / 4;  // 36

// Super-block b x T tokens into acc; vector q of its 8 rows (lane L = dword
// q of row L's block) is at vb + q * vs.
template <int T>
inline void super_block(const uint8_t* vb, size_t vs, int64_t b, const uint8_t* const* arows,
                        __m256* acc) {
  auto V = [&](int q) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vb + static_cast<size_t>(q) * vs));
  };
  const __m256i m63 = _mm256_set1_epi32(63), m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3),
                m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256 d = tiles8::half_to_float(V(0));
  const __m256 dmin = tiles8::half_to_float(_mm256_srli_epi32(V(0), 16));
  const size_t rec_off = static_cast<size_t>(b / 2) * kQ4KPairBytes;
  __m256 sb[T];
  for (auto& x : sb) x = _mm256_setzero_ps();
  for (int j = 0; j < 8; ++j) {
    __m256i sc;
    if (j < 4) {
      const __m128i s = _mm_cvtsi32_si128(8 * j);
      sc = _mm256_and_si256(_mm256_srl_epi32(V(1), s), m63);
    } else {
      const int jj = j - 4;
      const __m128i s = _mm_cvtsi32_si128(8 * jj), s6 = _mm_cvtsi32_si128(8 * jj + 6);
      sc = _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(V(3), s), m15),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(V(1), s6), m3), 4));
    }
    const __m256 ws = _mm256_mul_ps(_mm256_cvtepi32_ps(sc), d);
    __m256i w[8];
    const __m128i shift = _mm_cvtsi32_si128(4 * (j % 2));
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      w[i] = _mm256_and_si256(_mm256_srl_epi16(V(4 + 8 * (j / 2) + i), shift), m4);
    const int L = static_cast<int>(8 * (b % 2)) + j;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + rec_off;
      auto bc = [&](int i) { return tiles8::broadcast_dword(rec + 4 * L + 64 * i); };
      // |pair| <= 2 * 15 * 128, so eight of them still fit int16.
      __m256i s16 = _mm256_maddubs_epi16(w[0], bc(0));
#pragma GCC unroll 8
      for (int i = 1; i < 8; ++i) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[i], bc(i)));
      sb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones)), ws, sb[t]);
    }
  }
  // Every row's mins as bytes (byte j % 4 of mn[j / 4]; bits 4-5 of mins
  // 4..7 come from bits 6-7 of V(2), the dword shift's spill is masked off),
  // then as int16 pairs 0|2, 1|3, 4|6, 5|7: the order of the record's
  // sub-block sums (blocks.hpp), so sum_j m_j * isum_j is four vpmaddwd.
  const __m256i b63 = _mm256_set1_epi8(0x3F), b30 = _mm256_set1_epi8(0x30),
                lo16 = _mm256_set1_epi32(0x00FF00FF);
  const __m256i mn[2] = {_mm256_and_si256(V(2), b63),
                         _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(V(3), 4), m4),
                                         _mm256_and_si256(_mm256_srli_epi32(V(2), 2), b30))};
  const __m256i m16[4] = {_mm256_and_si256(mn[0], lo16), _mm256_srli_epi16(mn[0], 8),
                          _mm256_and_si256(mn[1], lo16), _mm256_srli_epi16(mn[1], 8)};
  for (int t = 0; t < T; ++t) {
    const uint8_t* rec = arows[t] + rec_off;
    const uint8_t* isum = rec + kQ4KPairIsum + 16 * (b % 2);
    auto bc = [&](int i) { return tiles8::broadcast_dword(isum + 4 * i); };
    __m256i ms = _mm256_madd_epi16(m16[0], bc(0));
    for (int i = 1; i < 4; ++i) ms = _mm256_add_epi32(ms, _mm256_madd_epi16(m16[i], bc(i)));
    sb[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), dmin, sb[t]);
    float da;
    std::memcpy(&da, rec + kQ4KPairD + 4 * (8 * (b % 2)), 4);
    acc[t] = _mm256_fmadd_ps(sb[t], _mm256_set1_ps(da), acc[t]);
  }
}

template <int T>
[[gnu::noinline]] void rows_tile(const uint8_t* const* rows, int64_t nsb,
                                 const uint8_t* const* arows, __m256* acc, const uint8_t* end) {
  tiles8::Tile<T> tile(arows, acc);
  alignas(32) __m256i v[kDwords];
  for (int64_t b = 0; b < nsb; ++b) {
    const size_t off = static_cast<size_t>(b) * sizeof(BlockQ4_K);
    if (b + 2 < nsb) row_tiles::prefetch_rows<tiles8::kTileRows, T>(rows, off, sizeof(BlockQ4_K));
    row_tiles::prefetch_next_tile<tiles8::kTileRows>(rows, off * tiles8::kTileRows,
                                                     tiles8::kTileRows * sizeof(BlockQ4_K), end);
    for (int m = 0; m < kDwords / 4; ++m)
      transpose8x4(rows, off + 16 * static_cast<size_t>(m), v + 4 * m);
    super_block<T>(reinterpret_cast<const uint8_t*>(v), sizeof(__m256i), b, tile.arows, tile.acc);
  }
  tile.store(acc);
}

// Half h (rows 8h..8h+7) of a packed16 panel x T tokens; the first half's
// pass prefetches the panel in order (T0: the second half rereads it from
// the caches), 4 super-blocks ahead for one token (fewer leave DRAM latency
// exposed), 2 for more, whose compute hides more of it.
template <int T>
[[gnu::noinline]] void panel_half(const uint8_t* panel, int h, int64_t nsb, const uint8_t* pf_end,
                                  const uint8_t* const* arows, __m256* acc) {
  constexpr size_t kBlock = 16 * sizeof(BlockQ4_K);
  constexpr int64_t kLead = T > 1 ? 2 : 4;
  tiles8::Tile<T> tile(arows, acc);
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kBlock;
    const uint8_t* ahead = blk + kLead * kBlock;
    if (h == 0 && ahead + kBlock <= pf_end) row_tiles::prefetch_lines<_MM_HINT_T0>(ahead, kBlock);
    super_block<T>(blk + 32 * static_cast<size_t>(h), 64, b, tile.arows, tile.acc);
  }
  tile.store(acc);
}

void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  tiles8::matmul_tiles(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* const* rows, const uint8_t* const* arows, __m256* acc,
          const uint8_t* end) { rows_tile<decltype(T)::value>(rows, nsb, arows, acc, end); });
}

// packed16 panels; the rows after the last whole panel are the matrix's
// ggml-layout tail.
void matmul_packed(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  tiles8::matmul_panels(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* panel, int h, const uint8_t* pf_end, const uint8_t* const* arows,
          __m256* acc) { panel_half<decltype(T)::value>(panel, h, nsb, pf_end, arows, acc); },
      [&](int64_t t0, int64_t t1) { matmul(w, w_row_bytes, acts, y, ldy, t0, t1); });
}

}  // namespace

void fill_avx2_table_q4_k(MatmulTable& t) {
  t.q4_k = matmul;
  t.q4_k_p16 = matmul_packed;
}

}  // namespace epyctune::engine::kernels::detail
