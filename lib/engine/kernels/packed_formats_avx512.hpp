// The row format that packed_tiles_avx512.hpp drives: Q6_K as ggml stores it (its
// super-block already unpacks into 16 lanes without a gather). How a group
// loads from a row and how it meets one token's activation record, in the
// scalar reference's rounding order.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "engine/kernels/packed_tiles_avx512.hpp"
#include "engine/kernels/q6_k_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail::avx512p {
namespace {

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
  // One row: two rows' 18 unpacked vectors do not fit the registers, and
  // the spills cost more than the second row saves.
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
