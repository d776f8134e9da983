// AVX2 Q4_0 / Q8_0 matmul on ggml rows, laid out as the AVX-512 kernel's
// 16-row tiles at half the width: ymm lane L is row L of an 8-row tile, a
// token's activation dword i is broadcast to the 8 rows (vpmaddubsw +
// vpmaddwd), and each lane's fma chain over the blocks is the scalar
// reference's per-row sum. Up to 4 tokens per pass over ggml rows, 17 over
// packed16 panels.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tiles8_avx2.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

using tiles8::transpose8x4;

struct Group {
  __m256i w[8];  // Q4: nibbles; Q8: signed quants (|q| and the signs per use)
  __m256 dw;     // lane L: row L's block scale
};

template <bool kQ4>
inline void load_rows(const uint8_t* const* rows, __m256i offs, int64_t b, Group& g) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const size_t off = static_cast<size_t>(b) * kBytes;
  g.dw = tiles8::half_to_float(tiles8::gather8(rows, offs, off));
  if constexpr (kQ4) {
    __m256i z[4];
    transpose8x4(rows, off + 2, z);
    const __m256i m = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      g.w[i] = _mm256_and_si256(z[i], m);
      g.w[i + 4] = _mm256_and_si256(_mm256_srli_epi16(z[i], 4), m);
    }
  } else {
    transpose8x4(rows, off + 2, g.w);
    transpose8x4(rows, off + 18, g.w + 4);
  }
}

// Exact int32 dot product of every row's block with one token's block (lane
// L of its activation record).
template <bool kQ4>
inline __m256i block_dot(const Group& g, const uint8_t* rec, int L) {
  const uint8_t* a = rec + 4 * L;
  auto bc = [&](int i) { return tiles8::broadcast_dword(a + 64 * i); };
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kQ4) {
    int32_t c;
    std::memcpy(&c, rec + kQ8GroupCorr + 4 * L, 4);
    // |pair| <= 2 * 15 * 128, so eight of them still fit int16.
    __m256i s16 = _mm256_maddubs_epi16(g.w[0], bc(0));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(g.w[i], bc(i)));
    return _mm256_add_epi32(_mm256_madd_epi16(s16, ones), _mm256_set1_epi32(c));
  } else {
    __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i p =
          _mm256_maddubs_epi16(_mm256_abs_epi8(g.w[i]), _mm256_sign_epi8(bc(i), g.w[i]));
      s[i % 2] = _mm256_add_epi32(s[i % 2], _mm256_madd_epi16(p, ones));
    }
    return _mm256_add_epi32(s[0], s[1]);
  }
}

template <bool kQ4, int T>
inline void block_tokens(const Group& g, const uint8_t* const* arows, int64_t b, __m256* acc) {
  const size_t rec_off = static_cast<size_t>(b / 16) * kQ8GroupBytes;
  const int L = static_cast<int>(b % 16);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const uint8_t* rec = arows[t] + rec_off;
    float da;
    std::memcpy(&da, rec + kQ8GroupD + 4 * L, 4);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<kQ4>(g, rec, L)),
                             _mm256_mul_ps(g.dw, _mm256_set1_ps(da)), acc[t]);
  }
}

template <bool kQ4, int T>
[[gnu::noinline]] void rows_tile(const uint8_t* const* rows, int64_t nb,
                                 const uint8_t* const* arows, __m256* acc, const uint8_t* end) {
  constexpr size_t kBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  tiles8::Tile<T> tile(arows, acc);
  const __m256i offs = tiles8::row_offsets(rows);
  const size_t row_len = static_cast<size_t>(nb) * kBytes;
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * kBytes;
    if (b % 4 == 0 && off + row_tiles::kRowAhead < row_len)
      row_tiles::prefetch_rows<tiles8::kTileRows, T>(rows, off, 4 * kBytes);
    row_tiles::prefetch_next_tile<tiles8::kTileRows>(rows, off * tiles8::kTileRows,
                                                     tiles8::kTileRows * kBytes, end);
    Group g;
    load_rows<kQ4>(rows, offs, b, g);
    block_tokens<kQ4, T>(g, tile.arows, b, tile.acc);
  }
  tile.store(acc);
}

// Half h (rows 8h..8h+7) of block b of a packed16 panel (blocks.hpp).
template <bool kQ4>
inline void load_panel_half(const uint8_t* blk, int h, Group& g) {
  g.dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
  auto ld = [&](int i) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kPackD + 64 * i + 32 * h));
  };
  if constexpr (kQ4) {
    const __m256i m = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256i z = ld(i);
      g.w[i] = _mm256_and_si256(z, m);
      g.w[i + 4] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m);
    }
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) g.w[i] = ld(i);
  }
}

// One half of a panel x T tokens. The first half's pass prefetches the panel
// in order (T0: the second half's pass rereads the lines from the caches),
// about 4.5 KiB ahead for one token: enough bytes in flight to cover DRAM
// latency, as for the AVX-512 kernels.
template <bool kQ4, int T>
[[gnu::noinline]] void panel_half(const uint8_t* panel, int h, int64_t nb, const uint8_t* pf_end,
                                  const uint8_t* const* arows, __m256* acc) {
  constexpr size_t kBlock = 16 * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  constexpr int64_t kLead = T > 1 ? 16 : kQ4 ? 16 : 8;
  tiles8::Tile<T> tile(arows, acc);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kBlock;
    const uint8_t* ahead = blk + kLead * kBlock;
    if (h == 0 && ahead + kBlock <= pf_end) row_tiles::prefetch_lines<_MM_HINT_T0>(ahead, kBlock);
    Group g;
    load_panel_half<kQ4>(blk, h, g);
    block_tokens<kQ4, T>(g, tile.arows, b, tile.acc);
  }
  tile.store(acc);
}

// panel_half for 5..17 tokens (a verify pass of K = 4..16 drafts): the
// half block stays in registers while the tokens go through it 4 at a time
// (what fits beside it), with the accumulators in L1, so the panel streams
// from DRAM once under all T tokens' work; chunks of 4 would rerun it from
// the caches with DRAM idle. Per row, token and block the same operations as
// panel_half: the same bytes.
template <bool kQ4, int T>
[[gnu::noinline]] void panel_half_wide(const uint8_t* panel, int h, int64_t nb,
                                       const uint8_t* pf_end, const uint8_t* const* arows_in,
                                       __m256* acc_out) {
  constexpr size_t kBlock = 16 * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  constexpr int64_t kLead = 16;
  const uint8_t* arows[T];
  __m256 acc[T];
  for (int t = 0; t < T; ++t) {
    arows[t] = arows_in[t];
    acc[t] = acc_out[t];
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kBlock;
    const uint8_t* ahead = blk + kLead * kBlock;
    if (h == 0 && ahead + kBlock <= pf_end) row_tiles::prefetch_lines<_MM_HINT_T0>(ahead, kBlock);
    Group g;
    load_panel_half<kQ4>(blk, h, g);
    [&]<int... i>(std::integer_sequence<int, i...>) {
      (block_tokens<kQ4, std::min(tiles8::kMaxTokens, T - tiles8::kMaxTokens * i)>(
           g, arows + tiles8::kMaxTokens * i, b, acc + tiles8::kMaxTokens * i),
       ...);
    }
    (std::make_integer_sequence<int, (T + tiles8::kMaxTokens - 1) / tiles8::kMaxTokens>{});
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// Q4_0, 2..17 tokens over packed16 panels: each token's activation dwords
// are broadcast once per matmul into a per-thread buffer, so that every
// vpmaddubsw takes its activations as a memory operand. The broadcasts
// (vpbroadcastd from memory) issue on the vector pipes on Zen 3: with them
// a token's block was 31 vector instructions for 8 vpmaddubsw, without them
// 20, and the kernel is bound by those issue slots once 2+ tokens reuse
// each weight. Block-major over a group of panels, so one block's expanded
// activations (T x 320 bytes) are read from L1 by all of the group's rows.
// Per row, token and block the same operations as block_tokens: the same
// bytes (the int16 sums regroup, exactly).
struct FreeAligned {
  void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{64}); }
};
constexpr size_t kExpVecs = 10;  // dwords 0..7, the correction, the scale
constexpr size_t kExpBytes = kExpVecs * 32;
// A group's accumulators (2 x panels x T ymm) stay within 8 KiB of L1; the
// wider the group, the fewer times each block's expanded activations are
// read again from L2 or L3 (k = 5632: 8 tokens expand to 450 KB).
constexpr int kMaxGroupPanels = 16;
constexpr int kGroupPanelTokens = 128;  // panels x tokens
constexpr int group_panels(int nt) {
  return std::max(1, std::min(kMaxGroupPanels, kGroupPanelTokens / nt));
}

void expand_acts(const Acts& acts, int64_t nb, int t0, int nt, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const size_t rec_off = static_cast<size_t>(b / 16) * kQ8GroupBytes;
    const int L = static_cast<int>(b % 16);
    for (int t = 0; t < nt; ++t) {
      const uint8_t* rec = acts.row(t0 + t) + rec_off;
      auto* o = reinterpret_cast<__m256i*>(out + (static_cast<size_t>(b) * nt + t) * kExpBytes);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i)
        _mm256_store_si256(o + i, tiles8::broadcast_dword(rec + 64 * i + 4 * L));
      _mm256_store_si256(o + 8, tiles8::broadcast_dword(rec + kQ8GroupCorr + 4 * L));
      _mm256_store_si256(o + 9, tiles8::broadcast_dword(rec + kQ8GroupD + 4 * L));
    }
  }
}

// noipa, not noinline: GCC 12's interprocedural analysis dropped the call
// for T = 8 (the accumulators came back zero), which the oracle tests caught.
#if defined(__clang__)
#define EPYCTUNE_NO_IPA [[gnu::noinline]]
#else
#define EPYCTUNE_NO_IPA [[gnu::noipa]]
#endif
template <int T>
EPYCTUNE_NO_IPA void q4_panels_expanded(const uint8_t* w, size_t panel_bytes, int n_panels,
                                        int64_t nb, const uint8_t* exp, const uint8_t* pf_end,
                                        __m256* acc) {
  constexpr size_t kBlock = 16 * sizeof(BlockQ4_0);
  constexpr int64_t kLead = 8;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    const auto* a = reinterpret_cast<const __m256i*>(exp + static_cast<size_t>(b) * T * kExpBytes);
    for (int p = 0; p < n_panels; ++p) {
      const uint8_t* blk = w + p * panel_bytes + static_cast<size_t>(b) * kBlock;
      const uint8_t* ahead = blk + kLead * kBlock;
      if (ahead + kBlock <= pf_end) row_tiles::prefetch_lines<_MM_HINT_T0>(ahead, kBlock);
      for (int h = 0; h < 2; ++h) {
        Group g;
        load_panel_half<true>(blk, h, g);
        __m256* ac = acc + (2 * p + h) * T;
#pragma GCC unroll 17
        for (int t = 0; t < T; ++t) {
          const __m256i* at = a + t * kExpVecs;
          auto m = [&](int i) { return _mm256_maddubs_epi16(g.w[i], _mm256_load_si256(at + i)); };
          const __m256i s16 = _mm256_add_epi16(
              _mm256_add_epi16(_mm256_add_epi16(m(0), m(1)), _mm256_add_epi16(m(2), m(3))),
              _mm256_add_epi16(_mm256_add_epi16(m(4), m(5)), _mm256_add_epi16(m(6), m(7))));
          const __m256i dot =
              _mm256_add_epi32(_mm256_madd_epi16(s16, ones), _mm256_load_si256(at + 8));
          const __m256 s =
              _mm256_mul_ps(g.dw, _mm256_load_ps(reinterpret_cast<const float*>(at + 9)));
          ac[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, ac[t]);
        }
      }
    }
  }
}

// Whole panels [r0, full_end) for 2+ tokens, kWideTokens at a time.
template <int kChunk>
void q4_matmul_expanded(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y,
                        int64_t ldy, int64_t r0, int64_t full_end) {
  // Grown, never shrunk: a vector's resize would zero the growth each time
  // the matmuls alternate between a short and a long k.
  thread_local std::unique_ptr<uint8_t[], FreeAligned> scratch;
  thread_local size_t scratch_bytes = 0;
  const int64_t nb = acts.k / 32;
  const size_t panel_bytes = static_cast<size_t>(kPanelRows) * w_row_bytes;
  const uint8_t* pf_end = w + static_cast<size_t>(full_end) * w_row_bytes;
  for (int t0 = 0; t0 < acts.n_tokens; t0 += kChunk) {
    const int nt = std::min(acts.n_tokens - t0, kChunk);
    const size_t need = static_cast<size_t>(nb) * kChunk * kExpBytes;
    if (scratch_bytes < need) {
      scratch.reset(static_cast<uint8_t*>(::operator new (need, std::align_val_t{64})));
      scratch_bytes = need;
    }
    expand_acts(acts, nb, t0, nt, scratch.get());
    const int group = group_panels(nt);
    for (int64_t r = r0; r < full_end; r += group * kPanelRows) {
      const int n_panels = static_cast<int>(std::min<int64_t>(group, (full_end - r) / kPanelRows));
      static_assert(kChunk <= kGroupPanelTokens);
      __m256 acc[2 * kGroupPanelTokens];
      for (int i = 0; i < 2 * n_panels * nt; ++i) acc[i] = _mm256_setzero_ps();
      const uint8_t* wp = w + static_cast<size_t>(r) * w_row_bytes;
      row_tiles::with_tokens<kChunk>(nt, [&](auto T) {
        q4_panels_expanded<decltype(T)::value>(wp, panel_bytes, n_panels, nb, scratch.get(), pf_end,
                                               acc);
      });
      for (int p = 0; p < n_panels; ++p)
        for (int h = 0; h < 2; ++h)
          for (int t = 0; t < nt; ++t)
            _mm256_storeu_ps(y + (t0 + t) * ldy + r + kPanelRows * p + tiles8::kTileRows * h,
                             acc[(2 * p + h) * nt + t]);
    }
  }
}

template <bool kQ4>
void matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
            int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  tiles8::matmul_tiles(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* const* rows, const uint8_t* const* arows, __m256* acc,
          const uint8_t* end) { rows_tile<kQ4, decltype(T)::value>(rows, nb, arows, acc, end); });
}

// packed16 panels, up to kWideTokens tokens per pass over each; the rows
// after the last whole panel are the matrix's ggml-layout tail.
constexpr int kWideTokens = 17;
template <bool kQ4>
void matmul_packed(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  if constexpr (kQ4) {
    if (acts.n_tokens >= 2) {
      const int64_t full_end = r0 + (r1 - r0) / kPanelRows * kPanelRows;
      q4_matmul_expanded<kWideTokens>(w, w_row_bytes, acts, y, ldy, r0, full_end);
      if (full_end < r1) matmul<kQ4>(w, w_row_bytes, acts, y, ldy, full_end, r1);
      return;
    }
  }
  tiles8::matmul_panels<kWideTokens>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* panel, int h, const uint8_t* pf_end, const uint8_t* const* arows,
          __m256* acc) {
        constexpr int kT = decltype(T)::value;
        if constexpr (kT <= tiles8::kMaxTokens)
          panel_half<kQ4, kT>(panel, h, nb, pf_end, arows, acc);
        else
          panel_half_wide<kQ4, kT>(panel, h, nb, pf_end, arows, acc);
      },
      [&](int64_t t0, int64_t t1) { matmul<kQ4>(w, w_row_bytes, acts, y, ldy, t0, t1); });
}

}  // namespace

void fill_avx2_table_qx_0(MatmulTable& t) {
  t.q4_0 = matmul<true>;
  t.q8_0 = matmul<false>;
  t.q4_0_p16 = matmul_packed<true>;
  t.q8_0_p16 = matmul_packed<false>;
}

}  // namespace epyctune::engine::kernels::detail
