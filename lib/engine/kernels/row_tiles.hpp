// The ISA-neutral pieces of the kernels whose vector lanes are the rows of a
// tile (tiles16_avx512.hpp: 16 rows in a zmm; tiles8_avx2.hpp: 8 in a ymm):
// the tile's accumulators in locals, and the software prefetch of panels and
// of ggml rows. Vector types and prefetch hints are template arguments, so one
// copy serves both widths.
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace epyctune::engine::kernels::detail {
// The one-token prefetch hint of kernels::stream_hint(), true for nta: a
// plain bool so the kernels read it without a call.
extern bool g_stream_nta;
}  // namespace epyctune::engine::kernels::detail

namespace epyctune::engine::kernels::detail::row_tiles {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

// Accumulators and token rows in locals: through the caller's pointers GCC
// stored every accumulator and reloaded every row pointer per block.
// Vec::V is the vector type (passed in a struct: GCC drops a vector type's
// attributes when it is a template argument itself).
template <class Vec, int T>
struct Locals {
  using V = typename Vec::V;
  V acc[T];
  const uint8_t* arows[T];
  Locals(const uint8_t* const* a, const V* in) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = in[t];
      arows[t] = a[t];
    }
  }
  void store(V* out) const {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) out[t] = acc[t];
  }
};

// f(std::integral_constant<int, n>) for n in [T, kMax] (a token count as a
// template argument); n > kMax calls f with kMax.
template <int kMax, int T = 1, class F>
[[gnu::always_inline]] inline void with_tokens(int n, F f) {
  if constexpr (T < kMax) {
    if (n > T) return with_tokens<kMax, T + 1>(n, f);
  }
  f(std::integral_constant<int, T>{});
}

// Every 64-byte line of [p, p + n).
template <_mm_hint kHint>
[[gnu::always_inline]] inline void prefetch_lines(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), kHint);
}

// More tokens reread the lines from L1 (t0); one token streams them once,
// with the CPU's hint (kernels::stream_hint). The bool does not change
// during a matmul, so the branch is predicted: one test per block.
template <int T>
[[gnu::always_inline]] inline void prefetch_stream(const uint8_t* p, size_t n) {
  if (T == 1 && g_stream_nta)
    prefetch_lines<_MM_HINT_NTA>(p, n);
  else
    prefetch_lines<_MM_HINT_T0>(p, n);
}

// ggml rows: kRows streams per tile, which the hardware prefetchers alone
// feed poorly. Each row's bytes [off, off + n) + kRowAhead are prefetched:
// 256 B covers the DRAM latency at one token; much further ahead, 16 streams
// of prefetched lines start evicting each other.
constexpr size_t kRowAhead = 256;
template <int kRows, int T>
[[gnu::always_inline]] inline void prefetch_rows(const uint8_t* const* rows, size_t off, size_t n) {
  for (int L = 0; L < kRows; ++L) prefetch_stream<T>(rows[L] + off + kRowAhead, n);
}

// ggml rows: the next tile (the kRows rows after these, contiguous) is
// streamed into the caches in order, n bytes per block from byte `at`, while
// this one computes: kRows row streams at a time read DRAM poorly, one
// sequential stream well. T2 hints: the lines are needed soon but not in L1
// yet. Nothing past end.
template <int kRows>
[[gnu::always_inline]] inline void prefetch_next_tile(const uint8_t* const* rows, size_t at,
                                                      size_t n, const uint8_t* end) {
  const uint8_t* next = rows[0] + kRows * static_cast<size_t>(rows[1] - rows[0]) + at;
  if (rows[1] == rows[0] || next + n > end) return;
  prefetch_lines<_MM_HINT_T2>(next, n);
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::row_tiles
