// The row formats that packed_tiles_avx512.hpp drives: Q4_K's packed16
// layout (blocks.hpp), and Q6_K as ggml stores it (its
// super-block already unpacks into 16 lanes without a gather). How a group
// loads from a row and how it meets one token's activation record, in the
// scalar reference's rounding order.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "engine/kernels/k_quants_avx512_impl.hpp"
#include "engine/kernels/packed_tiles_avx512.hpp"
#include "engine/kernels/q4_k_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail::avx512p {
namespace {

// Q4_K: lane L is sub-block L % 8 of super-block 2g + L / 8 (pairs; rest = 8
// for a row's odd last super-block).
template <bool kVnni>
struct Q4KPacked {
  static constexpr size_t kGroupBytes = 2 * sizeof(BlockQ4_K);
  static constexpr size_t kRecordBytes = kQ4KPairBytes;
  static int64_t groups(int64_t k) { return k / 256 / 2; }
  static int rest(int64_t k) { return static_cast<int>(k / 256 % 2) * 8; }
  static constexpr int64_t kTileRows = 2;
  // The same lanes as the ggml-layout kernel's (q4_k_avx512_impl.hpp), so its
  // group and dot product serve here too.
  using Group = avx512q4k::Pair;
  struct Token {
    __m512 da, bs;  // the records' scales and sub-block sums
  };

  [[gnu::always_inline]] static void load(const uint8_t* base, Group& g, int rest) {
    const size_t n = static_cast<size_t>(rest);
    const __mmask16 live = static_cast<__mmask16>((1u << rest) - 1u);
    // Scales and mins: 4 low bits from a byte per lane, 2 high bits from a
    // shared word shifted per lane.
    const __m128i lo = rest == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(base))
                                  : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(base));
    const __m512i b = _mm512_cvtepu8_epi32(lo);
    uint32_t sh = 0, mh = 0;
    uint64_t dd = 0;
    std::memcpy(&sh, base + n, n / 4);
    std::memcpy(&mh, base + n + n / 4, n / 4);
    std::memcpy(&dd, base + 3 * n / 2, n / 2);
    const __m512i shift =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i m3 = _mm512_set1_epi32(3), m15 = _mm512_set1_epi32(15);
    auto hi2 = [&](uint32_t word) {
      return _mm512_slli_epi32(
          _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(word)), shift), m3),
          4);
    };
    const __m512i sc = _mm512_or_si512(_mm512_and_si512(b, m15), hi2(sh));
    const __m512i mn = _mm512_or_si512(_mm512_srli_epi32(b, 4), hi2(mh));
    // [d0, dmin0, d1, dmin1] -> per-lane d and dmin of the lane's super-block.
    const __m512 d4 =
        _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(dd))));
    const __m512 dw = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), d4);
    const __m512 dmin = _mm512_permutexvar_ps(
        _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), d4);
    g.ws = _mm512_mul_ps(_mm512_cvtepi32_ps(sc), dw);
    g.wm = _mm512_mul_ps(_mm512_cvtepi32_ps(mn), dmin);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const uint8_t* p = base + 2 * n + 4 * n * static_cast<size_t>(i);
      const __m512i z = rest == 16 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(live, p);
      g.w[i] = _mm512_and_si512(z, m4);
      g.w[i + 4] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
    }
  }
  [[gnu::always_inline]] static Token token(const uint8_t* rec) {
    return {_mm512_load_ps(rec + kQ4KPairD), _mm512_load_ps(rec + kQ4KPairBsum)};
  }
  [[gnu::always_inline]] static void update(const Group& g, const uint8_t* rec, const Token& tok,
                                            __m512& acc, int rest) {
    acc = fma_lanes(_mm512_cvtepi32_ps(avx512q4k::pair_dot<kVnni>(g, rec)),
                    _mm512_mul_ps(g.ws, tok.da), acc, rest);
    acc = fnma_lanes(tok.bs, _mm512_mul_ps(g.wm, tok.da), acc, rest);
  }
};

// Q6_K in ggml's layout: a group is one super-block, unpacked into int16
// q * scale (avx512k::load_block); int32 lane l sums elements with
// (i % 32) / 2 == l. The 1x4 tiles keep a chunk's records in L1 where the
// one-row kernel streamed 8 tokens' records (74 KiB at k = 4096) from L2
// for every row.
template <bool kVnni>
struct Q6KRows {
  static constexpr size_t kGroupBytes = sizeof(BlockQ6_K);
  static constexpr size_t kRecordBytes = kKBlockBytes;
  static int64_t groups(int64_t k) { return k / 256; }
  static int rest(int64_t) { return 0; }
  // One row: two rows' 18 unpacked vectors spill (256 x 4096 in L2, 8
  // tokens: 0.111 ms with two, 0.099 with one, 0.181 one-row-8-tokens).
  static constexpr int64_t kTileRows = 1;
  using Group = avx512k::KBlock;
  struct Token {
    __m512 da;
  };
  [[gnu::always_inline]] static void load(const uint8_t* base, Group& g, int) {
    avx512k::load_block(base, g);
  }
  [[gnu::always_inline]] static Token token(const uint8_t* rec) {
    return {_mm512_set1_ps(*reinterpret_cast<const float*>(rec + kKBlockD))};
  }
  [[gnu::always_inline]] static void update(const Group& g, const uint8_t* rec, const Token& tok,
                                            __m512& acc, int) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(avx512k::block_dot<kVnni>(g, rec)),
                          _mm512_mul_ps(g.dw, tok.da), acc);
  }
};

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512p
