// AVX-512 matmul on rows whose 16 lanes are a row's own blocks or
// sub-blocks, for a row format F (packed_formats_avx512.hpp: packed16 Q4_K,
// Q6_K in ggml's layout; Q4_0 / Q8_0 have 16-row tiles of their own,
// qx_0_avx512_impl.hpp). Packed groups load without a
// gather or a transpose, which frees enough issue slots that the activations
// become the bottleneck: with one row at a time every activation vector is
// loaded once per row, and a batch of 8 tokens (80 KiB of records at
// k = 4096) spills out of L1. So a tile takes several rows per activation
// load:
//   - one token: one row at a time (a single stream for the prefetchers);
//   - 2..4 tokens: R = F::kTileRows (1 or 2) rows' unpacked groups stay in
//     registers while each token's records stream past them, and larger
//     batches go 4 tokens at a time over the same (now L1-resident) rows.
// Lane L of every accumulator still sums its lane's blocks in group order, so
// the result is bit-identical to the scalar reference and to the ggml-layout
// path.
//
// A format F provides: kGroupBytes and kRecordBytes (a group of 16 lanes in
// a weight row, and its activation record); groups(k) and rest(k) (a row's
// full groups and the lanes of its short last group, 0 if none);
// Group and load(base, group, rest) (rest < 16: the row's short last group,
// lanes >= rest load as zero); Token and token(rec) (what a token's record
// shares between rows); update(group, rec, token, acc, rest);
// kTileRows (R for 2+ tokens).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/kernels/reduce_avx512.hpp"
#include "engine/kernels/row_tiles.hpp"

namespace epyctune::engine::kernels::detail::avx512p {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

// acc += a * b on the live lanes [0, rest).
[[gnu::always_inline]] inline __m512 fma_lanes(__m512 a, __m512 b, __m512 acc, int rest) {
  if (rest == 16) return _mm512_fmadd_ps(a, b, acc);
  return _mm512_mask3_fmadd_ps(a, b, acc, static_cast<__mmask16>((1u << rest) - 1u));
}
// acc -= a * b on the live lanes (one rounding, as fma(-a, b, acc)).
[[gnu::always_inline]] inline __m512 fnma_lanes(__m512 a, __m512 b, __m512 acc, int rest) {
  if (rest == 16) return _mm512_fnmadd_ps(a, b, acc);
  return _mm512_mask3_fnmadd_ps(a, b, acc, static_cast<__mmask16>((1u << rest) - 1u));
}

constexpr int kPackedMaxTokens = 4;
// The software prefetch runs this many rows ahead of the tile, at the same
// group. One token streams fastest as a single row stream 2 rows ahead,
// with the CPU's streaming hint (non-temporal on Zen, where T0 lines
// displace the cache for data read once): multi-row tiles split the stream.
// Several tokens reread the rows from L2, which NTA lines skip: they use T0.
constexpr int64_t kPrefetchRows = 2;
// Rows per block that the token chunks share: the more rows, the more
// often each chunk's activation records are reused from L1.
constexpr int64_t kRowBlock = 32;
// Groups per segment: a chunk's records for one segment (4 tokens x 8 x 640
// bytes = 20 KiB) stay in L1 while the block's rows pass; unsegmented, long
// rows (k = 11008) push them out to L2.
constexpr int64_t kSegmentGroups = 8;

// Group gi (at byte off of each row; rest < 16: the short last group) of R
// rows against T tokens: acc[r * T + t] += block dots x scales, lane by lane;
// lanes >= rest are left as they are.
template <class F, int R, int T>
[[gnu::always_inline]] inline void group_rows_tokens(const uint8_t* const* rows, size_t off,
                                                     int rest, const uint8_t* const* arows,
                                                     int64_t gi, __m512* acc) {
  typename F::Group g[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) F::load(rows[r] + off, g[r], rest);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const uint8_t* rec = arows[t] + static_cast<size_t>(gi) * F::kRecordBytes;
    const typename F::Token tok = F::token(rec);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) F::update(g[r], rec, tok, acc[r * T + t], rest);
  }
}

// Groups [g0, g1) of R rows x T tokens; acc[r * T + t] (row r, token t) is
// read from and written back to `acc` so a row can be done in segments. With
// `last`, the row's short tail group is added and out[r * T + t] reduced.
// rows[r] are R adjacent packed rows (row_bytes apart); arows[t] the tokens'
// activation records.
// Not inlined: inside the driver loop GCC keeps the accumulators in
// registers and reloads the activations for every row instead (8 tokens: 73
// instead of 59 cycles per group and row).
template <class F, int R, int T>
[[gnu::noinline]] void packed_tile(const uint8_t* const* rows, size_t row_bytes, int rest,
                                   int64_t g0, int64_t g1, bool last, int64_t ahead_rows,
                                   const uint8_t* const* arows, __m512* acc_io, float* out) {
  constexpr size_t kGroup = F::kGroupBytes;
  __m512 acc[R * T];
#pragma GCC unroll 16
  for (int i = 0; i < R * T; ++i) acc[i] = g0 == 0 ? _mm512_setzero_ps() : acc_io[i];
  const uint8_t* ahead = rows[0] + ahead_rows * row_bytes;
  for (int64_t gi = g0; gi < g1; ++gi) {
    const size_t off = static_cast<size_t>(gi) * kGroup;
    if (ahead_rows > 0) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        row_tiles::prefetch_stream<T>(ahead + r * row_bytes + off, kGroup);
      }
    }
    group_rows_tokens<F, R, T>(rows, off, 16, arows, gi, acc);
  }
  if (!last) {
#pragma GCC unroll 16
    for (int i = 0; i < R * T; ++i) acc_io[i] = acc[i];
    return;
  }
  if (rest > 0) {
    // The short last group, packed with masked loads; its dead lanes are
    // masked out of the accumulators.
    group_rows_tokens<F, R, T>(rows, static_cast<size_t>(g1) * kGroup, rest, arows, g1, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) out[r * T + t] = reduce16_zmm(acc[r * T + t]);
  }
}

struct TileArgs {
  const uint8_t* const* rows;
  size_t row_bytes;
  int rest;
  int64_t g0, g1;
  bool last;
  int64_t ahead_rows;
  const uint8_t* const* arows;
  __m512* acc;
  float* out;
};

template <class F, int R>
void packed_tokens(const TileArgs& a, int nt) {
  row_tiles::with_tokens<kPackedMaxTokens>(nt, [&](auto T) {
    packed_tile<F, R, decltype(T)::value>(a.rows, a.row_bytes, a.rest, a.g0, a.g1, a.last,
                                          a.ahead_rows, a.arows, a.acc, a.out);
  });
}

// One token: row after row in one call, a single stream for the prefetchers
// (kPrefetchRows ahead, with the CPU's streaming hint). A call per row
// costs Q4_K about a fifth of its compute in call overhead and broken
// prefetch streams.
template <class F>
[[gnu::noinline]] void packed_rows_1tok(const uint8_t* w, size_t row_bytes, int64_t full, int rest,
                                        const uint8_t* arow, float* y, int64_t r0, int64_t r1) {
  constexpr size_t kGroup = F::kGroupBytes;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    const uint8_t* ahead = row + kPrefetchRows * row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < full; ++gi) {
      const size_t off = static_cast<size_t>(gi) * kGroup;
      row_tiles::prefetch_stream<1>(ahead + off, kGroup);
      group_rows_tokens<F, 1, 1>(&row, off, 16, &arow, gi, &acc);
    }
    if (rest > 0)
      group_rows_tokens<F, 1, 1>(&row, static_cast<size_t>(full) * kGroup, rest, &arow, full, &acc);
    y[r] = reduce16_zmm(acc);
  }
}

// Two or more tokens: R = F::kTileRows rows' unpacked groups stay in
// registers while up to 4 tokens' records stream past them; further chunks of
// 4 tokens rerun the block from L2. (One row against 8 tokens, records in
// L1, ran at half the speed: 8 accumulators, 8 weight vectors and the
// records' loads do not schedule as well.)
template <class F>
void matmul_packed(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  const int64_t full = F::groups(acts.k);
  const int rest = F::rest(acts.k);
  const int n = acts.n_tokens;
  if (n == 1) return packed_rows_1tok<F>(w, w_row_bytes, full, rest, acts.row(0), y, r0, r1);
  static_assert(F::kTileRows == 1 || F::kTileRows == 2, "tiles are 1 or 2 rows");
  alignas(64) __m512 acc[kRowBlock * kPackedMaxTokens];
  for (int64_t b0 = r0; b0 < r1; b0 += kRowBlock) {
    const int64_t b1 = std::min(r1, b0 + kRowBlock);
    for (int t0 = 0; t0 < n; t0 += kPackedMaxTokens) {
      const int nt = std::min(n - t0, kPackedMaxTokens);
      const uint8_t* arows[kPackedMaxTokens];
      for (int t = 0; t < nt; ++t) arows[t] = acts.row(t0 + t);
      for (int64_t g0 = 0; g0 == 0 || g0 < full; g0 += kSegmentGroups) {
        const int64_t g1 = std::min(full, g0 + kSegmentGroups);
        for (int64_t r = b0; r < b1; r += F::kTileRows) {
          const int64_t nr = std::min(F::kTileRows, b1 - r);
          const uint8_t* rows[2];
          for (int64_t i = 0; i < nr; ++i) rows[i] = w + static_cast<size_t>(r + i) * w_row_bytes;
          float out[2 * kPackedMaxTokens];
          // Only the first chunk reads the block from DRAM.
          const int64_t ahead = t0 == 0 ? kPrefetchRows : 0;
          TileArgs a{rows,  w_row_bytes, rest,
                     g0,    g1,          g1 == full,
                     ahead, arows,       acc + (r - b0) * kPackedMaxTokens,
                     out};
          if (nr == 2) {
            packed_tokens<F, 2>(a, nt);
          } else {
            for (int64_t i = 0; i < nr; ++i) {
              a.rows = rows + i;
              a.acc = acc + (r - b0 + i) * kPackedMaxTokens;
              a.out = out + i * nt;
              packed_tokens<F, 1>(a, nt);
            }
          }
          if (g1 == full)
            for (int64_t i = 0; i < nr; ++i)
              for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r + i] = out[i * nt + t];
        }
      }
    }
  }
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512p
