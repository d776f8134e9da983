// AVX-512 Q4_K matmul, included by q4_k_avx512.cpp (vpmaddubsw) and
// q4_k_avx512vnni.cpp (vpdpbusd) for ggml rows, and by packed_avx512*.cpp
// for packed16 panels (blocks.hpp). As for Q4_0 (qx_0_avx512_impl.hpp), lane
// L of every vector is row L of a 16-row tile: a sub-block of 16 rows is 8
// weight vectors, a token's activation dword is broadcast to all rows, then
// one fma by the rows' scales; the mins go in once per super-block, as an
// exact integer sum; each lane's chain is the scalar reference's per-row
// sum. Up to 8 tokens share one pass over the weights. ggml rows are first
// transposed into the panel layout, one super-block at a time, in a buffer
// that stays in L1.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tiles16_avx512.hpp"

namespace epyctune::engine::kernels::detail::avx512q4k {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

using tiles16::kTileRows;
using tiles16::Tile;

constexpr size_t kPanelBlock = kTileRows * sizeof(BlockQ4_K);  // 2304
// Panel super-blocks the software prefetch runs ahead: 2 (about 4.5 KiB).
// One ahead leaves the one-token stream short of bytes in flight (a 2-token
// pass then beats it); three ahead is erratic, its lines sometimes evicted
// before use.
constexpr int64_t kPrefetchBlocks = 2;

// Super-block b of 16 ggml rows, written in the panel layout.
[[gnu::always_inline]] inline void rows_to_panel(const uint8_t* const* rows, __m512i offs,
                                                 int64_t b, uint8_t* out) {
  const size_t off = static_cast<size_t>(b) * sizeof(BlockQ4_K);
  _mm512_store_si512(out, tiles16::gather16(rows, offs, off));  // d | dmin << 16
  __m512i z[4];
  tiles16::transpose16x4(rows, off + 4, z);  // the 12 scale bytes (+ 4 quant bytes)
#pragma GCC unroll 3
  for (int v = 0; v < 3; ++v) _mm512_store_si512(out + kQ4KPanelScales + 64 * v, z[v]);
#pragma GCC unroll 8
  for (int h = 0; h < 8; ++h) {  // 16 quant bytes at a time: chunk h / 2, dwords 4 (h % 2) ..
    tiles16::transpose16x4(rows, off + 16 + 16 * static_cast<size_t>(h), z);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) _mm512_store_si512(out + kQ4KPanelQs + 64 * (4 * h + i), z[i]);
  }
}

// Exact int32 dot products of the rows' sub-block (w) with one token's.
template <bool kVnni>
[[gnu::always_inline]] inline __m512i sub_dot(const __m512i* w, const uint8_t* a) {
  auto bc = [&](int i) { return tiles16::broadcast_dword(a + 64 * i); };
  if constexpr (kVnni) {
    __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) s[i % 2] = _mm512_dpbusd_epi32(s[i % 2], w[i], bc(i));
    return _mm512_add_epi32(s[0], s[1]);
  } else {
    // |pair| <= 2 * 15 * 128, so eight of them still fit int16.
    __m512i s16 = _mm512_maddubs_epi16(w[0], bc(0));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(w[i], bc(i)));
    return _mm512_madd_epi16(s16, _mm512_set1_epi16(1));
  }
}

// The mins' term of every row and token: sum_j m_j * isum_j, exact in int32
// (|.| <= 8 * 63 * 4064). m16: the rows' mins as int16 pairs 0|2, 1|3, 4|6,
// 5|7; isum: the token's sub-block sums as int16, paired the same way in the
// record (blocks.hpp). Four dot products per token replace a broadcast and an
// fma per sub-block, fewer instructions on the compute-bound multi-token path.
template <bool kVnni>
[[gnu::always_inline]] inline __m512i mins_dot(const __m512i* m16, const uint8_t* isum) {
  auto bc = [&](int i) { return tiles16::broadcast_dword(isum + 4 * i); };
  if constexpr (kVnni) {
    __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m16[0], bc(0));
#pragma GCC unroll 3
    for (int i = 1; i < 4; ++i) s = _mm512_dpwssd_epi32(s, m16[i], bc(i));
    return s;
  } else {
    __m512i s = _mm512_madd_epi16(m16[0], bc(0));
#pragma GCC unroll 3
    for (int i = 1; i < 4; ++i) s = _mm512_add_epi32(s, _mm512_madd_epi16(m16[i], bc(i)));
    return s;
  }
}

// Super-block b (panel layout at p) x T tokens into acc: the sub-blocks sum
// without the activations' scale, which is the super-block's, then the
// mins' integer sum goes in with one fma, and the activations' scale once
// (10 fma per token and super-block; the mins by sub-block took 17).
// ahead (or null): a panel block to prefetch, an eighth per sub-block so that
// the requests spread out (36 in a burst streamed slower).
template <bool kVnni, int T>
[[gnu::always_inline]] inline void super_block(const uint8_t* p, int64_t b,
                                               const uint8_t* const* arows, __m512* acc,
                                               const uint8_t* ahead) {
  const __m512i dd = _mm512_loadu_si512(p);
  const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
  const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
  // Every row's 8 six-bit scales and mins (q4k_scale_min) as bytes, all at
  // once: byte j % 4 of sc[j / 4] / mn[j / 4] (per sub-block, this took 12
  // shifts and masks for j >= 4, half a one-token super-block's work).
  __m512i sc[2], mn[2];
  {
    const __m512i v0 = _mm512_loadu_si512(p + kQ4KPanelScales);
    const __m512i v1 = _mm512_loadu_si512(p + kQ4KPanelScales + 64);
    const __m512i v2 = _mm512_loadu_si512(p + kQ4KPanelScales + 128);
    const __m512i b63 = _mm512_set1_epi8(0x3F), lo4 = _mm512_set1_epi8(0x0F);
    sc[0] = _mm512_and_si512(v0, b63);
    mn[0] = _mm512_and_si512(v1, b63);
    // Low nibble from v2, bits 4-5 from bits 6-7 of v0 / v1 (0xCA: a ? b : c
    // per bit, with a = the nibble mask); the dword shift drags the next
    // byte's low bits into bits 6-7, which the mask clears.
    sc[1] =
        _mm512_and_si512(_mm512_ternarylogic_epi32(lo4, v2, _mm512_srli_epi32(v0, 2), 0xCA), b63);
    mn[1] = _mm512_and_si512(
        _mm512_ternarylogic_epi32(lo4, _mm512_srli_epi32(v2, 4), _mm512_srli_epi32(v1, 2), 0xCA),
        b63);
  }
  // The mins as int16 pairs (0|2, 1|3, 4|6, 5|7), the sums' order in the record.
  const __m512i lo16 = _mm512_set1_epi32(0x00FF00FF);
  const __m512i m16[4] = {_mm512_and_si512(mn[0], lo16), _mm512_srli_epi16(mn[0], 8),
                          _mm512_and_si512(mn[1], lo16), _mm512_srli_epi16(mn[1], 8)};
  const __m512i m255 = _mm512_set1_epi32(0xFF), m4 = _mm512_set1_epi8(0x0F);
  const size_t rec_off = static_cast<size_t>(b / 2) * kQ4KPairBytes;
  __m512 sb[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) sb[t] = _mm512_setzero_ps();
#pragma GCC unroll 1
  for (int j = 0; j < 8; ++j) {
    if (ahead != nullptr) {
      // Lines [36 j / 8, 36 (j + 1) / 8) of the block's 36.
      const size_t l0 = static_cast<size_t>(j) * 36 / 8, l1 = static_cast<size_t>(j + 1) * 36 / 8;
      row_tiles::prefetch_stream<T>(ahead + 64 * l0, 64 * (l1 - l0));
    }
    const __m128i sh = _mm_cvtsi32_si128(8 * (j % 4));
    const __m512i scj = _mm512_and_si512(_mm512_srl_epi32(sc[j / 4], sh), m255);
    const __m512 ws = _mm512_mul_ps(_mm512_cvtepi32_ps(scj), d);
    // Chunk j / 2's nibbles: low for even j, high for odd.
    const uint8_t* q = p + kQ4KPanelQs + 512 * static_cast<size_t>(j / 2);
    __m512i w[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512i z = _mm512_loadu_si512(q + 64 * i);
      w[i] = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(z, 4) : z, m4);
    }
    const int L = static_cast<int>(8 * (b % 2)) + j;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + rec_off;
      sb[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sub_dot<kVnni>(w, rec + 4 * L)), ws, sb[t]);
    }
  }
  const int L0 = static_cast<int>(8 * (b % 2));
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const uint8_t* rec = arows[t] + rec_off;
    const __m512i ms = mins_dot<kVnni>(m16, rec + kQ4KPairIsum + 16 * (b % 2));
    sb[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), dmin, sb[t]);
    float da;
    std::memcpy(&da, rec + kQ4KPairD + 4 * L0, 4);
    acc[t] = _mm512_fmadd_ps(sb[t], _mm512_set1_ps(da), acc[t]);
  }
}

template <bool kVnni, int T>
[[gnu::noinline]] void rows_tile(const uint8_t* const* rows, int64_t nsb, const uint8_t* pf_end,
                                 const uint8_t* const* arows, __m512* acc) {
  Tile<T> tile(arows, acc);
  alignas(64) uint8_t buf[kPanelBlock];
  const __m512i offs = tiles16::row_offsets(rows);
  for (int64_t b = 0; b < nsb; ++b) {
    const size_t off = static_cast<size_t>(b) * sizeof(BlockQ4_K);
    if (b + 2 < nsb) row_tiles::prefetch_rows<kTileRows, T>(rows, off, sizeof(BlockQ4_K));
    row_tiles::prefetch_next_tile<kTileRows>(rows, off * kTileRows, kPanelBlock, pf_end);
    rows_to_panel(rows, offs, b, buf);
    super_block<kVnni, T>(buf, b, tile.arows, tile.acc, nullptr);
  }
  tile.store(acc);
}

template <bool kVnni, int T>
[[gnu::noinline]] void panel_tile(const uint8_t* panel, int64_t nsb, const uint8_t* pf_end,
                                  const uint8_t* const* arows, __m512* acc) {
  Tile<T> tile(arows, acc);
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kPanelBlock;
    const uint8_t* ahead = blk + kPrefetchBlocks * kPanelBlock;
    super_block<kVnni, T>(blk, b, tile.arows, tile.acc,
                          ahead + kPanelBlock <= pf_end ? ahead : nullptr);
  }
  tile.store(acc);
}

template <bool kVnni, bool kPanel>
void matmul_tiles(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  tiles16::matmul_tiles<kPanel>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, bool panel, const uint8_t* const* rows, const uint8_t* const* arows, __m512* acc,
          const uint8_t* pf_end) {
        constexpr int kT = decltype(T)::value;
        if (panel)
          panel_tile<kVnni, kT>(rows[0], nsb, pf_end, arows, acc);
        else
          rows_tile<kVnni, kT>(rows, nsb, pf_end, arows, acc);
      });
}

template <bool kVnni>
void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  matmul_tiles<kVnni, false>(w, w_row_bytes, acts, y, ldy, r0, r1);
}

template <bool kVnni>
void matmul_packed(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  matmul_tiles<kVnni, true>(w, w_row_bytes, acts, y, ldy, r0, r1);
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512q4k
