// Shared by the AVX-512 kernels whose vector lanes are the 16 rows of a tile
// (Q4_0 / Q8_0: qx_0_avx512_impl.hpp; Q4_K: q4_k_avx512_impl.hpp): loading a
// block of 16 ggml rows into lanes, the tile's accumulators, the token
// count as a template argument, and the loop over tiles and token chunks.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/kernels/kernels.hpp"
#include "engine/kernels/row_tiles.hpp"

namespace epyctune::engine::kernels::detail::tiles16 {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

constexpr int kMaxTokens = 8;
// A pair pass takes up to this many tokens (a verify pass of K = 16 drafts in
// one pass over the weights): from 8 tokens the VNNI kernel keeps the block's
// weights in registers and the tokens' accumulators in L1
// (qx_0_avx512_impl.hpp, panel_pair_wide).
constexpr int kMaxPairTokens = 17;
constexpr int64_t kTileRows = 16;

// z[i] lane L = dword i of the 16 bytes at rows[L] + off (i = 0..3).
[[gnu::always_inline]] inline void transpose16x4(const uint8_t* const* rows, size_t off,
                                                 __m512i z[4]) {
  __m512i p[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    auto ld = [&](int L) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[L] + off));
    };
    __m512i v = _mm512_zextsi128_si512(ld(j));
    v = _mm512_inserti32x4(v, ld(j + 4), 1);
    v = _mm512_inserti32x4(v, ld(j + 8), 2);
    p[j] = _mm512_inserti32x4(v, ld(j + 12), 3);
  }
  // 128-bit lane c of p[j] holds row 4c + j; a 4x4 dword transpose per lane
  // puts row 4c + j's dword i at dword 4c + j of z[i].
  const __m512i t0 = _mm512_unpacklo_epi32(p[0], p[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(p[0], p[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(p[2], p[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(p[2], p[3]);
  z[0] = _mm512_unpacklo_epi64(t0, t2);
  z[1] = _mm512_unpackhi_epi64(t0, t2);
  z[2] = _mm512_unpacklo_epi64(t1, t3);
  z[3] = _mm512_unpackhi_epi64(t1, t3);
}

// The rows' byte offsets from rows[0], as int32 lanes (a tile's 16 rows are
// less than 2 GiB apart).
[[gnu::always_inline]] inline __m512i row_offsets(const uint8_t* const* rows) {
  const __m512i r0 = _mm512_set1_epi64(reinterpret_cast<long long>(rows[0]));
  const __m256i lo = _mm512_cvtepi64_epi32(_mm512_sub_epi64(_mm512_loadu_si512(rows), r0));
  const __m256i hi = _mm512_cvtepi64_epi32(_mm512_sub_epi64(_mm512_loadu_si512(rows + 8), r0));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Lane L = the dword at rows[L] + off, given offs = row_offsets(rows): one
// 16-lane gather (two 8-lane ones from the pointers streamed ~25% slower).
[[gnu::always_inline]] inline __m512i gather16(const uint8_t* const* rows, __m512i offs,
                                               size_t off) {
  return _mm512_i32gather_epi32(offs, rows[0] + off, 1);
}

// The int32 at p (an activation dword: 4 quants, or two int16) in all 16 lanes.
[[gnu::always_inline]] inline __m512i broadcast_dword(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

struct Zmm {
  using V = __m512;
};
template <int T>
using Tile = row_tiles::Locals<Zmm, T>;

// Rows [r0, r1) of a matmul in 16-row tiles, up to kMaxTokens tokens per
// pass. For every tile and token chunk, tile(T, panel, rows, arows, acc,
// pf_end) adds the T tokens' dot products into acc[0..T) (lane L = row L);
// panel: w holds packed16 panels and this tile is a whole one (r0 is a
// multiple of 16; a short last tile is the matrix's ggml-layout tail, read
// through rows[], whose dead lanes repeat a live row and are not stored).
// pf_end bounds the software prefetch to the range's panels.
// With packed16 panels and 2+ tokens, pair(T, panel, panel_bytes, arows,
// acc, pf_end) takes two adjacent whole panels and up to kMaxPairTokens
// tokens at once (acc[t]: the first panel's rows, acc[kMaxPairTokens + t]:
// the second's), so that every activation broadcast feeds two dot-product
// instructions: a broadcast from memory costs a vector pipe slot, so halving
// the broadcasts raises the dot-product rate. Pass NoPair to go one panel at
// a time, as Q4_K does: its pair kernel (8 tokens in two halves of 4, whose
// chains fit the registers) gained a little from L2 but lost in the full 7B
// pass from DRAM.
struct NoPair {};
template <bool kPanel, class Tile, class Pair = NoPair>
void matmul_tiles(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, Tile tile, Pair pair = {}) {
  constexpr bool kPairs = kPanel && !std::is_same_v<Pair, NoPair>;
  const int64_t full_end = r0 + (r1 - r0) / kTileRows * kTileRows;
  const uint8_t* pf_end = w + static_cast<size_t>(full_end) * w_row_bytes;
  const size_t panel_bytes = static_cast<size_t>(kTileRows) * w_row_bytes;
  for (int64_t r = r0; r < r1;) {
    const int64_t live = std::min(kTileRows, r1 - r);
    const uint8_t* rows[kTileRows];
    for (int64_t L = 0; L < kTileRows; ++L)
      rows[L] = w + static_cast<size_t>(r + std::min(L, live - 1)) * w_row_bytes;
    const __mmask16 keep = static_cast<__mmask16>((1u << live) - 1u);
    const bool two = kPairs && r + 2 * kTileRows <= full_end;
    // A pair pass streams the weights from DRAM while it computes; a second
    // chunk would rerun them from L2 with DRAM idle, so pairs take more tokens.
    const int chunk = two ? kMaxPairTokens : kMaxTokens;
    for (int t0 = 0; t0 < acts.n_tokens; t0 += chunk) {
      const int nt = std::min(acts.n_tokens - t0, chunk);
      const uint8_t* arows[kMaxPairTokens];
      for (int t = 0; t < nt; ++t) arows[t] = acts.row(t0 + t);
      __m512 acc[2 * kMaxPairTokens];
      for (auto& a : acc) a = _mm512_setzero_ps();
      if constexpr (kPairs) {
        if (two && nt >= 2) {
          row_tiles::with_tokens<kMaxPairTokens>(nt, [&](auto T) {
            if constexpr (decltype(T)::value >= 2)
              pair(T, rows[0], panel_bytes, arows, acc, pf_end);
          });
          for (int t = 0; t < nt; ++t) {
            _mm512_storeu_ps(y + (t0 + t) * ldy + r, acc[t]);
            _mm512_storeu_ps(y + (t0 + t) * ldy + r + kTileRows, acc[kMaxPairTokens + t]);
          }
          continue;
        }
      }
      // Here nt <= kMaxTokens: a chunk of kMaxPairTokens is a pair's, and
      // only its last single token comes this way.
      for (int part = 0; part < (two ? 2 : 1); ++part) {
        const uint8_t* prow[kTileRows];
        for (int64_t L = 0; L < kTileRows; ++L) prow[L] = rows[L] + part * panel_bytes;
        __m512* a = acc + part * kMaxTokens;
        row_tiles::with_tokens<kMaxTokens>(
            nt, [&](auto T) { tile(T, kPanel && live == kTileRows, prow, arows, a, pf_end); });
        for (int t = 0; t < nt; ++t)
          _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r + part * kTileRows, keep, a[t]);
      }
    }
    r += two ? 2 * kTileRows : kTileRows;
  }
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::tiles16
