// AVX-512 Q4_0 / Q8_0 matmul on packed16 rows (blocks.hpp), included by the
// same TUs as qx_0_avx512_impl.hpp. Packed groups load without a gather or a
// transpose, which frees enough issue slots that the activations become the
// bottleneck: with one row at a time every activation vector is loaded once
// per row, and a batch of 8 tokens (80 KiB of records at k = 4096) spills
// out of L1. So a tile takes several rows per activation load:
//   - one token: R = 4 rows share each activation vector (held in registers);
//   - 2..4 tokens: R = 2 rows' unpacked groups stay in registers while each
//     token's records stream past them, and larger batches go 4 tokens at a
//     time over the same (now L1-resident) rows.
// Lane L of every accumulator still sums block 16g + L in group order, so the
// result is bit-identical to the scalar reference and to the ggml-layout path.
#pragma once

#include "engine/kernels/qx_0_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail::avx512 {
namespace {

constexpr int kPackedMaxTokens = 4;
// How far ahead of the tile the software prefetch runs in the thread's linear
// stream of rows (kernel-bench, 1 GiB, 2 threads: 2-16 KiB all reach the
// probe's bandwidth at one token; without the hint 76%).
constexpr size_t kPrefetchBytes = 8192;
// Rows per block that the token chunks share (kb: 2 -> 14.7, 8 -> 16.0,
// 32 -> 18.1 GB/s for 8 tokens on one core).
constexpr int64_t kRowBlock = 32;

// One token, R rows, VNNI: the token's 8 activation vectors are loaded once
// per group and each row's weights are unpacked straight into vpdpbusd.
template <bool kQ4, int R>
[[gnu::always_inline]] inline void packed_group_1tok_vnni(const uint8_t* const* rows, size_t off,
                                                          const uint8_t* rec, __m512* acc) {
  __m512i a[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) a[i] = _mm512_load_si512(rec + 64 * i);
  const __m512i corr = _mm512_load_si512(rec + kQ8GroupCorr);
  const __m512 da = _mm512_load_ps(rec + kQ8GroupD);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const uint8_t* g = rows[r] + off;
    auto ld = [&](int i) { return _mm512_loadu_si512(g + kPackD + 64 * i); };
    __m512i s0 = corr, s1 = _mm512_setzero_si512();
    if constexpr (kQ4) {
      const __m512i m = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m512i z = ld(i);
        s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(z, m), a[i]);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(_mm512_srli_epi16(z, 4), m), a[i + 4]);
      }
    } else {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
      for (int i = 0; i < 8; i += 2) {
        s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(ld(i), flip), a[i]);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(ld(i + 1), flip), a[i + 1]);
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(dw, da),
                             acc[r]);
  }
}

// group_dot for several rows per token: one chain per row, started from the
// correction as a load (a register copy would cost an ALU slot per row).
template <bool kQ4, bool kVnni>
[[gnu::always_inline]] inline __m512i packed_dot(const Group& g, const uint8_t* rec) {
  if constexpr (kVnni) {
    __m512i s = _mm512_load_si512(rec + kQ8GroupCorr);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) s = _mm512_dpbusd_epi32(s, g.w[i], _mm512_load_si512(rec + 64 * i));
    return s;
  } else {
    return group_dot<kQ4, kVnni>(g, rec);
  }
}

// acc[r * T + t]: row r, token t. rows[r] are R packed rows; arows[t] the T
// tokens' activation records.
template <bool kQ4, bool kVnni, int R, int T>
void packed_tile(const uint8_t* const* rows, int64_t nb, const uint8_t* const* arows,
                 const uint8_t* pf, float* out) {
  constexpr size_t kGroup = 16 * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  __m512 acc[R * T];
#pragma GCC unroll 16
  for (int i = 0; i < R * T; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = nb / 16;
  for (int64_t gi = 0; gi < full; ++gi) {
    const size_t off = static_cast<size_t>(gi) * kGroup;
    // The R rows are adjacent in memory: one linear stream per thread, which
    // this tile walks R groups at a time; the hint stays kPrefetchBytes ahead.
    if (pf != nullptr) {
#pragma GCC unroll 16
      for (size_t o = 0; o < R * kGroup; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(pf + static_cast<size_t>(gi) * R * kGroup + o),
                     _MM_HINT_T0);
    }
    if constexpr (T == 1 && kVnni) {
      packed_group_1tok_vnni<kQ4, R>(rows, off, arows[0] + static_cast<size_t>(gi) * kQ8GroupBytes,
                                     acc);
    } else {
      Group g[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) load_group_packed<kQ4, kVnni>(rows[r] + off, g[r]);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* rec = arows[t] + static_cast<size_t>(gi) * kQ8GroupBytes;
        const __m512 da = _mm512_load_ps(rec + kQ8GroupD);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i p = packed_dot<kQ4, kVnni>(g[r], rec);
          acc[r * T + t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(g[r].dw, da), acc[r * T + t]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    tail_group<kQ4, kVnni, T>(rows[r], nb, arows, acc + r * T);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) out[r * T + t] = reduce(acc[r * T + t]);
  }
}

template <bool kQ4, bool kVnni, int R>
void packed_tokens(const uint8_t* const* rows, int64_t nb, const uint8_t* const* arows, int nt,
                   const uint8_t* pf, float* out) {
  switch (nt) {
    case 1:
      return packed_tile<kQ4, kVnni, R, 1>(rows, nb, arows, pf, out);
    case 2:
      return packed_tile<kQ4, kVnni, R, 2>(rows, nb, arows, pf, out);
    case 3:
      return packed_tile<kQ4, kVnni, R, 3>(rows, nb, arows, pf, out);
    default:
      return packed_tile<kQ4, kVnni, R, 4>(rows, nb, arows, pf, out);
  }
}

template <bool kQ4, bool kVnni>
void matmul_packed(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  const int n = acts.n_tokens;
  // Four rows share one token's activations; with more tokens two rows'
  // groups are what fits in the 32 vector registers.
  const int64_t kRows = n == 1 ? 4 : 2;
  // Token chunks run over a block of rows at a time, so one chunk's records
  // stay in L1 across the block and the block's weights come from DRAM once.
  const int64_t kBlock = n <= kPackedMaxTokens ? kRows : kRowBlock;
  for (int64_t b0 = r0; b0 < r1; b0 += kBlock) {
    const int64_t b1 = std::min(r1, b0 + kBlock);
    for (int t0 = 0; t0 < n; t0 += kPackedMaxTokens) {
      const int nt = std::min(n - t0, kPackedMaxTokens);
      const uint8_t* arows[kPackedMaxTokens];
      for (int t = 0; t < nt; ++t) arows[t] = acts.row(t0 + t);
      for (int64_t r = b0; r < b1; r += kRows) {
        const int64_t nr = std::min(kRows, b1 - r);
        const uint8_t* rows[4];
        for (int64_t i = 0; i < nr; ++i) rows[i] = w + static_cast<size_t>(r + i) * w_row_bytes;
        // Later token chunks find the block in cache: no more hints.
        const uint8_t* pf = t0 == 0 ? rows[0] + kPrefetchBytes : nullptr;
        float out[4 * kPackedMaxTokens];
        if (nr == 4)
          packed_tokens<kQ4, kVnni, 4>(rows, nb, arows, nt, pf, out);
        else if (nr == 2)
          packed_tokens<kQ4, kVnni, 2>(rows, nb, arows, nt, pf, out);
        else
          for (int64_t i = 0; i < nr; ++i)
            packed_tokens<kQ4, kVnni, 1>(rows + i, nb, arows, nt, pf ? pf + i * w_row_bytes : pf,
                                         out + i * nt);
        for (int64_t i = 0; i < nr; ++i)
          for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r + i] = out[i * nt + t];
      }
    }
  }
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail::avx512
