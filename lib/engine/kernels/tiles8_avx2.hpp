// Shared by the AVX2 kernels whose ymm lanes are the 8 rows of a tile
// (Q4_0 / Q8_0: qx_0_avx2.cpp; Q4_K: q4_k_avx2.cpp): 8 ggml rows' dwords into
// lanes, and the loop over tiles and token chunks.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/kernels/row_tiles.hpp"

namespace epyctune::engine::kernels::detail::tiles8 {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

constexpr int kMaxTokens = 4;
constexpr int64_t kTileRows = 8;

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

// The rows' byte offsets from rows[0] (a tile's rows are < 2 GiB apart), for
// a gather of one dword per row: 8 scalar loads into a stack array and a
// vector load stalled on store forwarding (Q4_0, one token: 3x slower).
inline __m256i row_offsets(const uint8_t* const* rows) {
  alignas(32) int32_t o[kTileRows];
  for (int L = 0; L < kTileRows; ++L) o[L] = static_cast<int32_t>(rows[L] - rows[0]);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(o));
}
inline __m256i gather8(const uint8_t* const* rows, __m256i offs, size_t off) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + off), offs, 1);
}

// The int32 at p (an activation dword: 4 quants, or two int16) in all 8 lanes.
inline __m256i broadcast_dword(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

struct Ymm {
  using V = __m256;
};
template <int T>
using Tile = row_tiles::Locals<Ymm, T>;

// The tokens in chunks of up to kChunk: run(T, arows, acc) fills
// acc[0..T) from zero, then store(t, acc[t - t0]) for each token t.
template <int kChunk = kMaxTokens, class Run, class Store>
inline void token_chunks(const Acts& acts, Run run, Store store) {
  for (int t0 = 0; t0 < acts.n_tokens; t0 += kChunk) {
    const int nt = std::min(acts.n_tokens - t0, kChunk);
    const uint8_t* arows[kChunk];
    for (int t = 0; t < nt; ++t) arows[t] = acts.row(t0 + t);
    __m256 acc[kChunk];
    for (auto& a : acc) a = _mm256_setzero_ps();
    row_tiles::with_tokens<kChunk>(nt, [&](auto T) { run(T, arows, acc); });
    for (int t = 0; t < nt; ++t) store(t0 + t, acc[t]);
  }
}

// Rows [r0, r1) in 8-row tiles, up to kMaxTokens tokens per pass:
// tile(T, rows, arows, acc, end) (end: the range's last byte + 1) adds T tokens' dot products into
// acc[0..T) (lane L = row L; a short last tile repeats a live row in its dead lanes, which are not
// stored).
template <class Tile>
void matmul_tiles(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, Tile tile) {
  const uint8_t* end = w + static_cast<size_t>(r1) * w_row_bytes;
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const int64_t live = std::min(kTileRows, r1 - r);
    const uint8_t* rows[kTileRows];
    for (int64_t L = 0; L < kTileRows; ++L)
      rows[L] = w + static_cast<size_t>(r + std::min(L, live - 1)) * w_row_bytes;
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(live)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    token_chunks(
        acts,
        [&](auto T, const uint8_t* const* arows, __m256* acc) { tile(T, rows, arows, acc, end); },
        [&](int t, __m256 acc) { _mm256_maskstore_ps(y + t * ldy + r, keep, acc); });
  }
}

// Rows [r0, r1) of packed16 panels (r0 a multiple of 16): each whole panel
// as two 8-row halves, up to kChunk tokens per pass, where half(T, panel,
// h, pf_end, arows, acc) adds T tokens' dot products of rows 8h..8h+7 into
// acc[0..T) (pf_end bounds the prefetch to the whole panels); then
// tail(r, r1) for the rows after the last whole panel, the matrix's
// ggml-layout tail.
template <int kChunk = kMaxTokens, class Half, class Tail>
void matmul_panels(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1, Half half, Tail tail) {
  const int64_t full_end = r0 + (r1 - r0) / kPanelRows * kPanelRows;
  const uint8_t* pf_end = w + static_cast<size_t>(full_end) * w_row_bytes;
  for (int64_t r = r0; r < full_end; r += kPanelRows) {
    const uint8_t* panel = w + static_cast<size_t>(r) * w_row_bytes;
    for (int h = 0; h < 2; ++h) {
      token_chunks<kChunk>(
          acts,
          [&](auto T, const uint8_t* const* arows, __m256* acc) {
            half(T, panel, h, pf_end, arows, acc);
          },
          [&](int t, __m256 acc) { _mm256_storeu_ps(y + t * ldy + r + kTileRows * h, acc); });
    }
  }
  if (full_end < r1) tail(full_end, r1);
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::tiles8
