// AVX-512 Q4_K matmul, included by k_quants_avx512.cpp (vpmaddubsw) and
// k_quants_avx512vnni.cpp (vpdpbusd) for ggml rows, and by packed_avx512*.cpp
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
// Panel super-blocks the software prefetch runs ahead: 2 (8 tokens, 2
// threads, 1 GiB from DRAM: 32.8 GB/s, 1 ahead 29.7). One token: the 7B
// decode, paired runs alternating in the same minutes, 2 ahead took
// 0.82-0.98x the time of 1 ahead in 8 pairs of 2026-11-23 09:2x (3 ahead
// 0.74-1.45x); an earlier session had 1 ahead best in slow minutes (probe
// ~40 GB/s: 87 ms against 95) and 2 in good ones (63 against 69). The K=2
// pass beat K=1 with 1 ahead, i.e. the one-token stream ran short.
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
// fma per sub-block (one core, 8 tokens from L2: 18.8-19.0 -> 19.8-20.9 GB/s).
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
// A panel super-block's scales: d, dmin, and every row's 8 six-bit scales
// and mins (q4k_scale_min) as bytes, all at once: byte j % 4 of sc[j / 4]
// (per sub-block, this took 12 shifts and masks for j >= 4, half a
// one-token super-block's work); the mins as int16 pairs (0|2, 1|3, 4|6,
// 5|7), the sums' order in the record.
struct Head {
  __m512 d, dmin;
  __m512i sc[2], m16[4];
};
[[gnu::always_inline]] inline Head load_head(const uint8_t* p) {
  Head h;
  const __m512i dd = _mm512_loadu_si512(p);
  h.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
  h.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
  const __m512i v0 = _mm512_loadu_si512(p + kQ4KPanelScales);
  const __m512i v1 = _mm512_loadu_si512(p + kQ4KPanelScales + 64);
  const __m512i v2 = _mm512_loadu_si512(p + kQ4KPanelScales + 128);
  const __m512i b63 = _mm512_set1_epi8(0x3F), lo4 = _mm512_set1_epi8(0x0F);
  h.sc[0] = _mm512_and_si512(v0, b63);
  const __m512i mn0 = _mm512_and_si512(v1, b63);
  // Low nibble from v2, bits 4-5 from bits 6-7 of v0 / v1 (0xCA: a ? b : c
  // per bit, with a = the nibble mask); the dword shift drags the next
  // byte's low bits into bits 6-7, which the mask clears.
  h.sc[1] =
      _mm512_and_si512(_mm512_ternarylogic_epi32(lo4, v2, _mm512_srli_epi32(v0, 2), 0xCA), b63);
  const __m512i mn1 = _mm512_and_si512(
      _mm512_ternarylogic_epi32(lo4, _mm512_srli_epi32(v2, 4), _mm512_srli_epi32(v1, 2), 0xCA),
      b63);
  const __m512i lo16 = _mm512_set1_epi32(0x00FF00FF);
  h.m16[0] = _mm512_and_si512(mn0, lo16);
  h.m16[1] = _mm512_srli_epi16(mn0, 8);
  h.m16[2] = _mm512_and_si512(mn1, lo16);
  h.m16[3] = _mm512_srli_epi16(mn1, 8);
  return h;
}

// Sub-block j's weight scales: fp32(d) * sc_j, exact.
[[gnu::always_inline]] inline __m512 sub_scale(const Head& h, int j) {
  const __m128i sh = _mm_cvtsi32_si128(8 * (j % 4));
  const __m512i scj = _mm512_and_si512(_mm512_srl_epi32(h.sc[j / 4], sh), _mm512_set1_epi32(0xFF));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(scj), h.d);
}

// Vector i of sub-block j's quants: chunk j / 2's nibbles, low for even j.
[[gnu::always_inline]] inline __m512i sub_quants(const uint8_t* p, int j, int i) {
  const __m512i z = _mm512_loadu_si512(p + kQ4KPanelQs + 512 * static_cast<size_t>(j / 2) + 64 * i);
  return _mm512_and_si512(j % 2 ? _mm512_srli_epi16(z, 4) : z, _mm512_set1_epi8(0x0F));
}

// The super-block's end for one token: the mins' integer sum with one fma,
// then the activations' scale.
template <bool kVnni>
[[gnu::always_inline]] inline __m512 finish(const Head& h, __m512 sb, const uint8_t* rec, int64_t b,
                                            __m512 acc) {
  const __m512i ms = mins_dot<kVnni>(h.m16, rec + kQ4KPairIsum + 16 * (b % 2));
  sb = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), h.dmin, sb);
  float da;
  std::memcpy(&da, rec + kQ4KPairD + 4 * static_cast<int>(8 * (b % 2)), 4);
  return _mm512_fmadd_ps(sb, _mm512_set1_ps(da), acc);
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
  const Head h = load_head(p);
  const size_t rec_off = static_cast<size_t>(b / 2) * kQ4KPairBytes;
  __m512 sb[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) sb[t] = _mm512_setzero_ps();
#pragma GCC unroll 1
  for (int j = 0; j < 8; ++j) {
    if (ahead != nullptr) {
      // Lines [36 j / 8, 36 (j + 1) / 8) of the block's 36.
      const size_t l0 = static_cast<size_t>(j) * 36 / 8, l1 = static_cast<size_t>(j + 1) * 36 / 8;
      row_tiles::prefetch_lines<row_tiles::kStreamHint<T>>(ahead + 64 * l0, 64 * (l1 - l0));
    }
    const __m512 ws = sub_scale(h, j);
    __m512i w[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) w[i] = sub_quants(p, j, i);
    const int L = static_cast<int>(8 * (b % 2)) + j;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* rec = arows[t] + rec_off;
      sb[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sub_dot<kVnni>(w, rec + 4 * L)), ws, sb[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = finish<kVnni>(h, sb[t], arows[t] + rec_off, b, acc[t]);
}

// The same for two adjacent panels' super-block b at once (p[0], p[1]; acc[t]
// and acc[kMaxTokens + t]), VNNI and 2+ tokens: every activation broadcast
// feeds both panels' vpdpbusd (see tiles16::matmul_tiles). Per row the same
// integer sums and fma chain, so the same bytes.
template <int T>
[[gnu::always_inline]] inline void super_block_pair(const uint8_t* const* p, int64_t b,
                                                    const uint8_t* const* arows, __m512* acc,
                                                    const uint8_t* const* ahead) {
  const size_t rec_off = static_cast<size_t>(b / 2) * kQ4KPairBytes;
  const Head h[2] = {load_head(p[0]), load_head(p[1])};
  __m512 sb[2][T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) sb[0][t] = sb[1][t] = _mm512_setzero_ps();
#pragma GCC unroll 1
  for (int jj = 0; jj < 8; jj += 2)
#pragma GCC unroll 2
    for (int j = jj; j < jj + 2; ++j) {  // j % 2 (low or high nibbles) a constant
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q)
        if (ahead[q] != nullptr) {
          const size_t l0 = static_cast<size_t>(j) * 36 / 8,
                       l1 = static_cast<size_t>(j + 1) * 36 / 8;
          row_tiles::prefetch_lines<_MM_HINT_T0>(ahead[q] + 64 * l0, 64 * (l1 - l0));
        }
      const int L = static_cast<int>(8 * (b % 2)) + j;
      const __m512 ws[2] = {sub_scale(h[0], j), sub_scale(h[1], j)};
      // At most 4 tokens at a time: 8 tokens' 16 integer chains and 16 sums
      // do not fit the registers (GCC spilled the chains, ~20% slower); the
      // second half reloads the weights from L1.
      auto chunk = [&](auto T0, auto TN) {
        constexpr int t0 = decltype(T0)::value, tn = decltype(TN)::value;
        __m512i s[2][tn];
#pragma GCC unroll 4
        for (int t = 0; t < tn; ++t) s[0][t] = s[1][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const __m512i w0 = sub_quants(p[0], j, i), w1 = sub_quants(p[1], j, i);
#pragma GCC unroll 4
          for (int t = 0; t < tn; ++t) {
            const __m512i a = tiles16::broadcast_dword(arows[t0 + t] + rec_off + 4 * L + 64 * i);
            s[0][t] = _mm512_dpbusd_epi32(s[0][t], w0, a);
            s[1][t] = _mm512_dpbusd_epi32(s[1][t], w1, a);
          }
        }
#pragma GCC unroll 2
        for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 4
          for (int t = 0; t < tn; ++t)
            sb[q][t0 + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[q][t]), ws[q], sb[q][t0 + t]);
        }
      };
      if constexpr (T > 4) {
        chunk(std::integral_constant<int, 0>{}, std::integral_constant<int, 4>{});
        // Or GCC keeps the first half's 16 weight vectors for the second.
        asm volatile("" ::: "memory");
        chunk(std::integral_constant<int, 4>{}, std::integral_constant<int, T - 4>{});
      } else {
        chunk(std::integral_constant<int, 0>{}, std::integral_constant<int, T>{});
      }
    }
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      __m512* out = acc + q * tiles16::kMaxTokens + t;
      *out = finish<true>(h[q], sb[q][t], arows[t] + rec_off, b, *out);
    }
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

template <int T>
[[gnu::noinline]] void panel_pair(const uint8_t* panel, size_t panel_bytes, int64_t nsb,
                                  const uint8_t* pf_end, const uint8_t* const* arows_in,
                                  __m512* acc) {
  const uint8_t* arows[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) arows[t] = arows_in[t];
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* blk[2] = {panel + static_cast<size_t>(b) * kPanelBlock,
                             panel + panel_bytes + static_cast<size_t>(b) * kPanelBlock};
    const uint8_t* ahead[2];
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      ahead[q] = blk[q] + kPrefetchBlocks * kPanelBlock;
      if (ahead[q] + kPanelBlock > pf_end) ahead[q] = nullptr;
    }
    super_block_pair<T>(blk, b, arows, acc, ahead);
  }
}

template <bool kVnni, bool kPanel>
void matmul_tiles(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  auto tile = [&](auto T, bool panel, const uint8_t* const* rows, const uint8_t* const* arows,
                  __m512* acc, const uint8_t* pf_end) {
    constexpr int kT = decltype(T)::value;
    if (panel)
      panel_tile<kVnni, kT>(rows[0], nsb, pf_end, arows, acc);
    else
      rows_tile<kVnni, kT>(rows, nsb, pf_end, arows, acc);
  };
  if constexpr (kVnni) {
    tiles16::matmul_tiles<kPanel>(
        w, w_row_bytes, acts, y, ldy, r0, r1, tile,
        [&](auto T, const uint8_t* panel, size_t panel_bytes, const uint8_t* const* arows,
            __m512* acc, const uint8_t* pf_end) {
          panel_pair<decltype(T)::value>(panel, panel_bytes, nsb, pf_end, arows, acc);
        });
  } else {
    tiles16::matmul_tiles<kPanel>(w, w_row_bytes, acts, y, ldy, r0, r1, tile);
  }
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
