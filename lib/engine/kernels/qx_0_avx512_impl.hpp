// AVX-512 Q4_0 / Q8_0 matmul, included by qx_0_avx512.cpp (BW: vpmaddubsw)
// and qx_0_avx512vnni.cpp (vpdpbusd), for ggml rows and for packed16 panels
// (blocks.hpp). Lane L of every vector is row L of a 16-row tile: a block of
// 16 rows unpacks into 8 weight vectors, a token's activation dword i is
// broadcast to all 16 rows, and each lane's fma chain over the blocks is the
// scalar reference's per-row sum. A token costs 8 dot-product instructions per
// 16 rows and block whatever the batch, the activations stay in L1, and up to
// 8 tokens share one pass over the weights. (Not 16 blocks of one row in the
// lanes: every token then needs its own 64-byte activation loads per row,
// 8 tokens do not fit the registers, and a second 4-token chunk reruns each
// row block from L2 while DRAM idles.)
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tiles16_avx512.hpp"

namespace epyctune::engine::kernels::detail::avx512 {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

using tiles16::gather16;
using tiles16::kTileRows;
using tiles16::Tile;
using tiles16::transpose16x4;

// Panel blocks the software prefetch runs ahead: for several tokens about
// 4.6 KiB (16 Q4_0 blocks), where the rate peaks (a shorter lead leaves
// DRAM latency exposed, a longer one evicts lines before use). One token is
// bandwidth-bound: the CPU's streaming hint (non-temporal on Zen: the
// weights are read once per pass) and a shorter lead, about 2.2 KiB as for
// Q4_K, stream fastest.
template <bool kQ4, int T>
constexpr int64_t kPrefetchBlocks = T > 1 ? 16
                                    : kQ4 ? 8
                                          : 4;

// A pair streams two panels: each runs half the lead ahead, so as many
// bytes are in flight as for one panel (the full lead on each doubles them
// and is slower, most of all for Q8_0).
template <bool kQ4, int T>
constexpr int64_t kPairPrefetchBlocks = kPrefetchBlocks<kQ4, T> / 2;

struct Group {
  __m512i w[8];      // unsigned operand: Q4 nibbles; Q8 quants xor 0x80 (VNNI) or |q|
  __mmask64 neg[8];  // Q8 without VNNI: bytes whose weight is negative
  __m512 dw;         // lane L: row L's block scale
};

// A vector of Q4 nibble pairs: the low nibbles (elements 0-15 of the rows'
// blocks) and the high ones (16-31).
[[gnu::always_inline]] inline __m512i low_nibbles(__m512i z) {
  return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
}
[[gnu::always_inline]] inline __m512i high_nibbles(__m512i z) {
  return low_nibbles(_mm512_srli_epi16(z, 4));
}
// Q8 quants as vpdpbusd's unsigned operand (the record's correction undoes it).
[[gnu::always_inline]] inline __m512i q8_unsigned(__m512i z) {
  return _mm512_xor_si512(z, _mm512_set1_epi8(static_cast<char>(0x80)));
}

// z holds the raw quant dwords (Q4: 4 vectors of nibble pairs; Q8: 8).
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline void unpack_quants(const __m512i* z, Group& g) {
  if constexpr (kQ4) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      g.w[i] = low_nibbles(z[i]);
      g.w[i + 4] = high_nibbles(z[i]);
    }
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      if constexpr (kVnni) {
        g.w[i] = q8_unsigned(z[i]);
      } else {
        g.neg[i] = _mm512_movepi8_mask(z[i]);
        g.w[i] = _mm512_abs_epi8(z[i]);
      }
    }
  }
}

// Block b of 16 rows in ggml's layout (rows[L]: row L; a short tile repeats
// a live row, whose lanes are never stored).
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline void load_rows(const uint8_t* const* rows, __m512i offs, int64_t b,
                                             Group& g) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const size_t off = static_cast<size_t>(b) * kBytes;
  // The scales: the low half of a dword per row.
  g.dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(gather16(rows, offs, off)));
  __m512i z[8];
  transpose16x4(rows, off + 2, z);
  if constexpr (!kQ4) transpose16x4(rows, off + 18, z + 4);
  unpack_quants<kQ4, kVnni>(z, g);
}

// A packed16 panel block's 16 row scales.
[[gnu::always_inline]] inline __m512 panel_scales(const uint8_t* blk) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
}

// Block b of a packed16 panel: the same vectors, as plain loads.
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline void load_panel(const uint8_t* blk, Group& g) {
  g.dw = panel_scales(blk);
  __m512i z[8];
#pragma GCC unroll 8
  for (int i = 0; i < (kQ4 ? 4 : 8); ++i) z[i] = _mm512_loadu_si512(blk + kPackD + 64 * i);
  unpack_quants<kQ4, kVnni>(z, g);
}

// Exact int32 dot product of every row's block with one token's block; a is
// the block's lane in its activation record (dword i at a + 64 i).
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline __m512i block_dot(const Group& g, const uint8_t* rec, int L) {
  const uint8_t* a = rec + 4 * L;
  auto bc = [&](int i) { return tiles16::broadcast_dword(a + 64 * i); };
  int32_t c;
  std::memcpy(&c, rec + kQ8GroupCorr + 4 * L, 4);
  if constexpr (kVnni) {
    // Two independent chains: integer sums are exact in any order.
    __m512i s[2] = {_mm512_set1_epi32(c), _mm512_setzero_si512()};
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) s[i % 2] = _mm512_dpbusd_epi32(s[i % 2], g.w[i], bc(i));
    return _mm512_add_epi32(s[0], s[1]);
  } else if constexpr (kQ4) {
    // |pair| <= 2 * 15 * 128, so eight of them still fit int16.
    __m512i s16 = _mm512_maddubs_epi16(g.w[0], bc(0));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(g.w[i], bc(i)));
    return _mm512_add_epi32(_mm512_madd_epi16(s16, _mm512_set1_epi16(1)), _mm512_set1_epi32(c));
  } else {
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512i ai = bc(i);
      const __m512i sa = _mm512_mask_sub_epi8(ai, g.neg[i], _mm512_setzero_si512(), ai);
      s = _mm512_add_epi32(
          s, _mm512_madd_epi16(_mm512_maddubs_epi16(g.w[i], sa), _mm512_set1_epi16(1)));
    }
    return s;
  }
}

// One token's block into the rows' sums, in the canonical order:
// acc + P * (d_w * d_a), with P the exact dot products and rec the token's
// group record.
[[gnu::always_inline]] inline __m512 add_block(__m512 acc, __m512i p, __m512 dw, const uint8_t* rec,
                                               int L) {
  float da;
  std::memcpy(&da, rec + kQ8GroupD + 4 * L, 4);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc);
}

template <bool kQ4, bool kVnni, int T>
[[gnu::always_inline]] inline void block_tokens(const Group& g, const uint8_t* const* arows,
                                                int64_t b, __m512* acc) {
  const size_t rec_off = static_cast<size_t>(b / 16) * kQ8GroupBytes;
  const int L = static_cast<int>(b % 16);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const uint8_t* rec = arows[t] + rec_off;
    acc[t] = add_block(acc[t], block_dot<kQ4, kVnni>(g, rec, L), g.dw, rec, L);
  }
}

// One 16-row tile x T tokens over all nb blocks; acc[t] lane L = row L.
template <bool kQ4, bool kVnni, int T>
[[gnu::noinline]] void rows_tile(const uint8_t* const* rows, int64_t nb, const uint8_t* pf_end,
                                 const uint8_t* const* arows, __m512* acc) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const size_t row_len = static_cast<size_t>(nb) * kBytes;
  const __m512i offs = tiles16::row_offsets(rows);
  Tile<T> tile(arows, acc);
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * kBytes;
    if (b % 4 == 0 && off + row_tiles::kRowAhead < row_len)
      row_tiles::prefetch_rows<kTileRows, T>(rows, off, 4 * kBytes);
    row_tiles::prefetch_next_tile<kTileRows>(rows, off * kTileRows, kTileRows * kBytes, pf_end);
    Group g;
    load_rows<kQ4, kVnni>(rows, offs, b, g);
    block_tokens<kQ4, kVnni, T>(g, tile.arows, b, tile.acc);
  }
  tile.store(acc);
}

// The same from a packed16 panel; the prefetch stays below pf_end.
template <bool kQ4, bool kVnni, int T>
[[gnu::noinline]] void panel_tile(const uint8_t* panel, int64_t nb, const uint8_t* pf_end,
                                  const uint8_t* const* arows, __m512* acc) {
  constexpr size_t kBlock = kTileRows * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  Tile<T> tile(arows, acc);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kBlock;
    const uint8_t* ahead = blk + kPrefetchBlocks<kQ4, T> * kBlock;
    if (ahead + kBlock <= pf_end) row_tiles::prefetch_stream<T>(ahead, kBlock);
    Group g;
    load_panel<kQ4, kVnni>(blk, g);
    block_tokens<kQ4, kVnni, T>(g, tile.arows, b, tile.acc);
  }
  tile.store(acc);
}

// Two adjacent packed16 panels (32 rows) x T tokens, VNNI: each activation
// dword is broadcast once for both panels' vpdpbusd. acc[t]: the first
// panel's rows, acc[kMaxPairTokens + t]: the second's. Per row and block the
// same exact integer dot product and the same fma as panel_tile, so the same
// bytes. Faster than two panel_tile calls because the broadcasts, not the
// dot products, limit the single-panel kernel at 2-8 tokens.
template <bool kQ4, int T>
[[gnu::noinline]] void panel_pair(const uint8_t* panel, size_t panel_bytes, int64_t nb,
                                  const uint8_t* pf_end, const uint8_t* const* arows_in,
                                  __m512* acc) {
  constexpr size_t kBlock = kTileRows * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  constexpr int kChunks = kQ4 ? 4 : 8;
  const uint8_t* arows[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) arows[t] = arows_in[t];
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[2] = {panel + static_cast<size_t>(b) * kBlock,
                             panel + panel_bytes + static_cast<size_t>(b) * kBlock};
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const uint8_t* ahead = blk[p] + kPairPrefetchBlocks<kQ4, T> * kBlock;
      if (ahead + kBlock <= pf_end) row_tiles::prefetch_stream<T>(ahead, kBlock);
    }
    const size_t rec_off = static_cast<size_t>(b / 16) * kQ8GroupBytes;
    const int L = static_cast<int>(b % 16);
    __m512i s[2][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      s[0][t] = s[1][t] = tiles16::broadcast_dword(arows[t] + rec_off + kQ8GroupCorr + 4 * L);
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) {
      __m512i w[2][kQ4 ? 2 : 1];
#pragma GCC unroll 2
      for (int p = 0; p < 2; ++p) {
        const __m512i z = _mm512_loadu_si512(blk[p] + kPackD + 64 * c);
        if constexpr (kQ4) {
          w[p][0] = low_nibbles(z);
          w[p][1] = high_nibbles(z);
        } else {
          w[p][0] = q8_unsigned(z);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* a = arows[t] + rec_off + 4 * L + 64 * c;
        const __m512i lo = tiles16::broadcast_dword(a);
        s[0][t] = _mm512_dpbusd_epi32(s[0][t], w[0][0], lo);
        s[1][t] = _mm512_dpbusd_epi32(s[1][t], w[1][0], lo);
        if constexpr (kQ4) {
          const __m512i hi = tiles16::broadcast_dword(a + 256);
          s[0][t] = _mm512_dpbusd_epi32(s[0][t], w[0][1], hi);
          s[1][t] = _mm512_dpbusd_epi32(s[1][t], w[1][1], hi);
        }
      }
    }
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const __m512 dw = panel_scales(blk[p]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        __m512* out = acc + p * tiles16::kMaxPairTokens + t;
        *out = add_block(*out, s[p][t], dw, arows[t] + rec_off, L);
      }
    }
  }
}

// Tokens [t0, t0 + G) of panel_pair_wide's block: their integer sums stay in
// registers (16 of them at G = 4) while the block's weights, w[c][p][h], are
// applied to each in turn; the sums then go into the accumulators in L1.
template <bool kQ4, int G>
[[gnu::always_inline]] inline void pair_group(const __m512i (&w)[kQ4 ? 4 : 8][2][kQ4 ? 2 : 1],
                                              const __m512 (&dw)[2], const uint8_t* const* arows,
                                              int t0, size_t rec_off, int L, __m512* acc) {
  constexpr int kChunks = kQ4 ? 4 : 8;
  __m512i s[2][G];
#pragma GCC unroll 4
  for (int t = 0; t < G; ++t)
    s[0][t] = s[1][t] = tiles16::broadcast_dword(arows[t0 + t] + rec_off + kQ8GroupCorr + 4 * L);
#pragma GCC unroll 8
  for (int c = 0; c < kChunks; ++c) {
#pragma GCC unroll 4
    for (int t = 0; t < G; ++t) {
      const uint8_t* a = arows[t0 + t] + rec_off + 4 * L + 64 * c;
      const __m512i lo = tiles16::broadcast_dword(a);
      s[0][t] = _mm512_dpbusd_epi32(s[0][t], w[c][0][0], lo);
      s[1][t] = _mm512_dpbusd_epi32(s[1][t], w[c][1][0], lo);
      if constexpr (kQ4) {
        const __m512i hi = tiles16::broadcast_dword(a + 256);
        s[0][t] = _mm512_dpbusd_epi32(s[0][t], w[c][0][1], hi);
        s[1][t] = _mm512_dpbusd_epi32(s[1][t], w[c][1][1], hi);
      }
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
#pragma GCC unroll 4
    for (int t = 0; t < G; ++t) {
      __m512* out = acc + p * tiles16::kMaxPairTokens + t0 + t;
      *out = add_block(*out, s[p][t], dw[p], arows[t0 + t] + rec_off, L);
    }
  }
}

// panel_pair for more tokens (a verify pass of K = 7..16 drafts): the
// block's two panels are loaded and unpacked once into 16 registers and
// applied to the tokens in groups of 4, whose sums fit the registers beside
// them; the accumulators live in L1 (the fma's memory operand and a store
// use the load/store ports, not the vector pipes vpdpbusd needs). The
// weights stream from DRAM once, under the computation of all T tokens: in
// two chunks of 8 the second would rerun them from L2 with DRAM idle. Per
// row, token and block the same integer dot product and fma as panel_pair:
// the same bytes.
template <bool kQ4, int T>
[[gnu::noinline]] void panel_pair_wide(const uint8_t* panel, size_t panel_bytes, int64_t nb,
                                       const uint8_t* pf_end, const uint8_t* const* arows_in,
                                       __m512* acc_out) {
  constexpr size_t kBlock = kTileRows * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  constexpr int kChunks = kQ4 ? 4 : 8;
  const uint8_t* arows[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) arows[t] = arows_in[t];
  __m512 acc[2 * tiles16::kMaxPairTokens];
  for (int i = 0; i < 2 * tiles16::kMaxPairTokens; ++i) acc[i] = acc_out[i];
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[2] = {panel + static_cast<size_t>(b) * kBlock,
                             panel + panel_bytes + static_cast<size_t>(b) * kBlock};
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const uint8_t* ahead = blk[p] + kPairPrefetchBlocks<kQ4, T> * kBlock;
      if (ahead + kBlock <= pf_end) row_tiles::prefetch_stream<T>(ahead, kBlock);
    }
    __m512i w[kChunks][2][kQ4 ? 2 : 1];
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) {
#pragma GCC unroll 2
      for (int p = 0; p < 2; ++p) {
        const __m512i z = _mm512_loadu_si512(blk[p] + kPackD + 64 * c);
        if constexpr (kQ4) {
          w[c][p][0] = low_nibbles(z);
          w[c][p][1] = high_nibbles(z);
        } else {
          w[c][p][0] = q8_unsigned(z);
        }
      }
    }
    const __m512 dw[2] = {panel_scales(blk[0]), panel_scales(blk[1])};
    const size_t rec_off = static_cast<size_t>(b / 16) * kQ8GroupBytes;
    const int L = static_cast<int>(b % 16);
    // Groups of 4, the last one 1..4 tokens.
    [&]<int... g>(std::integer_sequence<int, g...>) {
      (pair_group<kQ4, std::min(4, T - 4 * g)>(w, dw, arows, 4 * g, rec_off, L, acc), ...);
    }
    (std::make_integer_sequence<int, (T + 3) / 4>{});
  }
  for (int i = 0; i < 2 * tiles16::kMaxPairTokens; ++i) acc_out[i] = acc[i];
}

// Up to 7 tokens panel_pair is as fast as panel_pair_wide (5 and 6: faster,
// the wide kernel's last group is short); at 8 its sums and accumulators,
// 32 registers, spill and the wide kernel is ~9% faster per token.
constexpr int kPairRegisterTokens = 7;

template <bool kQ4, bool kVnni, bool kPanel>
void matmul_tiles(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  auto tile = [&](auto T, bool panel, const uint8_t* const* rows, const uint8_t* const* arows,
                  __m512* acc, const uint8_t* pf_end) {
    constexpr int kT = decltype(T)::value;
    if (panel)
      panel_tile<kQ4, kVnni, kT>(rows[0], nb, pf_end, arows, acc);
    else
      rows_tile<kQ4, kVnni, kT>(rows, nb, pf_end, arows, acc);
  };
  if constexpr (kVnni) {
    tiles16::matmul_tiles<kPanel>(
        w, w_row_bytes, acts, y, ldy, r0, r1, tile,
        [&](auto T, const uint8_t* panel, size_t panel_bytes, const uint8_t* const* arows,
            __m512* acc, const uint8_t* pf_end) {
          constexpr int kT = decltype(T)::value;
          if constexpr (kT <= kPairRegisterTokens)
            panel_pair<kQ4, kT>(panel, panel_bytes, nb, pf_end, arows, acc);
          else
            panel_pair_wide<kQ4, kT>(panel, panel_bytes, nb, pf_end, arows, acc);
        });
  } else {
    tiles16::matmul_tiles<kPanel>(w, w_row_bytes, acts, y, ldy, r0, r1, tile);
  }
}

template <bool kQ4, bool kVnni>
void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  matmul_tiles<kQ4, kVnni, false>(w, w_row_bytes, acts, y, ldy, r0, r1);
}

template <bool kQ4, bool kVnni>
void matmul_packed(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  matmul_tiles<kQ4, kVnni, true>(w, w_row_bytes, acts, y, ldy, r0, r1);
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512
