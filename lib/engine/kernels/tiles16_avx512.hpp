// Shared by the AVX-512 kernels whose vector lanes are the 16 rows of a tile
// (Q4_0 / Q8_0: qx_0_avx512_impl.hpp; Q4_K: q4_k_avx512_impl.hpp): loading a
// block of 16 ggml rows into lanes, the tile's accumulators, and the token
// count as a template argument.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace epyctune::engine::kernels::detail::tiles16 {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

constexpr int kMaxTokens = 8;
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

// Lane L = the dword at rows[L] + off.
[[gnu::always_inline]] inline __m512i gather16(const uint8_t* const* rows, size_t off) {
  const __m512i o = _mm512_set1_epi64(static_cast<long long>(off));
  const __m256i lo =
      _mm512_i64gather_epi32(_mm512_add_epi64(_mm512_loadu_si512(rows), o), nullptr, 1);
  const __m256i hi =
      _mm512_i64gather_epi32(_mm512_add_epi64(_mm512_loadu_si512(rows + 8), o), nullptr, 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Accumulators and token rows in locals: through the caller's pointers GCC
// stored every accumulator and reloaded every row pointer per block.
template <int T>
struct Tile {
  __m512 acc[T];
  const uint8_t* arows[T];
  Tile(const uint8_t* const* a, const __m512* in) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = in[t];
      arows[t] = a[t];
    }
  }
  void store(__m512* out) const {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) out[t] = acc[t];
  }
};

template <int T, class F>
[[gnu::always_inline]] inline void with_tokens(int n, F f) {
  if constexpr (T < kMaxTokens) {
    if (n > T) return with_tokens<T + 1>(n, f);
  }
  f(std::integral_constant<int, T>{});
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::tiles16
