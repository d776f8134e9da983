// Q5_0, Q5_1, MXFP4 and Q5_K weights run through the Q8_0 and Q4_K kernels of
// the active ISA: 16 rows at a time are rewritten, exactly, into blocks of
// those types in a per-thread scratch buffer, so every ISA inherits their
// canonical order and gives the scalar table's bytes. The rewrites (the
// definition of these types' canonical sums):
//   Q5_0:  Q8_0 block {d, q - 16}.
//   MXFP4: Q8_0 block {fp16(2^(e-128)), kvalues[q]}: exact for 104 <= e <= 143
//          (fp16's range) and for blocks of zeros; any other block sends its
//          row to mxfp4_row_ref, which evaluates the same chain with the f32
//          scale.
//   Q5_1:  d*q + m is two Q8_0 rows, D = {d, q} and M = {m, 1 ... 1};
//          y = chain(D) + chain(M).
//   Q5_K:  Q4_K's chain twice: A = {d, dmin, scales, low nibbles} and
//          B = {2d, 0, scales without mins, 8 * fifth bit} (2d * sc * 8h is
//          d * sc * 16h exactly); y = chain(A) + chain(B).
// Integer dot products are exact, so the rewrite changes no rounding within a
// chain; what it costs is a pass over the 16 rows into L1/L2 before the kernel.
#include "engine/kernels/convert_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/blocks.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

using Scratch = std::vector<uint8_t, AlignedAllocator<uint8_t>>;

uint8_t* scratch(int slot, size_t bytes) {
  thread_local Scratch bufs[3];
  if (bufs[slot].size() < bytes) bufs[slot].resize(bytes);
  return bufs[slot].data();
}

// Where a converted block goes: row L of a ggml-layout scratch matrix, or
// lane L of a packed16 panel (blocks.hpp), so the ISAs with packed kernels
// read plain vectors instead of gathering and transposing the 16 rows.
struct Sink {
  uint8_t* base;
  size_t row_bytes;
  bool packed;
  void q8(int64_t L, int64_t b, uint16_t d, const int8_t* qs) const {
    if (!packed) {
      auto* blk = reinterpret_cast<BlockQ8_0*>(base + static_cast<size_t>(L) * row_bytes) + b;
      blk->d = d;
      std::memcpy(blk->qs, qs, 32);
      return;
    }
    uint8_t* p = base + static_cast<size_t>(b) * kPanelRows * sizeof(BlockQ8_0);
    std::memcpy(p + 2 * L, &d, 2);
    for (int i = 0; i < 8; ++i) std::memcpy(p + kPackD + 64 * i + 4 * L, qs + 4 * i, 4);
  }
  void q4k(int64_t L, int64_t b, const BlockQ4_K& blk) const {
    if (!packed) {
      reinterpret_cast<BlockQ4_K*>(base + static_cast<size_t>(L) * row_bytes)[b] = blk;
      return;
    }
    uint8_t* p = base + static_cast<size_t>(b) * kPanelRows * sizeof(BlockQ4_K);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&blk);
    for (int q = 0; q < 36; ++q) std::memcpy(p + 64 * q + 4 * L, bytes + 4 * q, 4);
  }
};

void q5_0_to_q8_0(const BlockQ5_0* src, const Sink& out, int64_t L, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    int8_t qs[32];
    for (int j = 0; j < 32; ++j)
      qs[j] = static_cast<int8_t>(q5_quant(src[b].qs, src[b].qh, j) - 16);
    out.q8(L, b, src[b].d, qs);
  }
}

void q5_1_to_q8_0(const BlockQ5_1* src, const Sink& dd, const Sink& mm, int64_t L, int64_t nb) {
  int8_t ones[32];
  std::memset(ones, 1, 32);
  for (int64_t b = 0; b < nb; ++b) {
    int8_t qs[32];
    for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(q5_quant(src[b].qs, src[b].qh, j));
    dd.q8(L, b, src[b].d, qs);
    mm.q8(L, b, src[b].m, ones);
  }
}

// False when a block's scale has no exact fp16 (the row then takes the
// f32 path).
bool mxfp4_to_q8_0(const BlockMxfp4* src, const Sink& out, int64_t L, int64_t nb) {
  bool exact = true;
  for (int64_t b = 0; b < nb; ++b) {
    bool zero = true;
    int8_t qs[32];
    for (int j = 0; j < 16; ++j) {
      const int lo = kMxfp4Values[src[b].qs[j] & 0xF], hi = kMxfp4Values[src[b].qs[j] >> 4];
      qs[j] = static_cast<int8_t>(lo);
      qs[j + 16] = static_cast<int8_t>(hi);
      zero = zero && lo == 0 && hi == 0;
    }
    const int e = src[b].e;
    uint16_t d = 0;
    if (e >= 104 && e <= 143) {
      d = f32_to_fp16(e8m0_half_to_f32(src[b].e));
    } else {
      exact = exact && zero;
    }
    out.q8(L, b, d, qs);
  }
  return exact;
}

// One Q5_K super-block as the A and B Q4_K blocks above.
void q5_k_to_q4_k(const BlockQ5_K& s, BlockQ4_K& a, BlockQ4_K& b) {
  a.d = s.d;
  a.dmin = s.dmin;
  std::memcpy(a.scales, s.scales, 12);
  std::memcpy(a.qs, s.qs, 128);
  const uint16_t d2 = f32_to_fp16(2.0f * fp16_to_f32(s.d));
  if ((d2 & 0x7c00u) == 0x7c00u)
    throw std::runtime_error(
        "Q5_K super-block scale d=" + std::to_string(fp16_to_f32(s.d)) +
        " is too large for this engine's kernels (2d overflows fp16); requantize the file");
  b.d = d2;
  b.dmin = 0;
  for (int i = 0; i < 4; ++i) {
    b.scales[i] = s.scales[i];                // scales 0-3, and the high bits of scales 4-7
    b.scales[i + 4] = 0;                      // mins 0-3 and the high bits of mins 4-7
    b.scales[i + 8] = s.scales[i + 8] & 0xF;  // low bits of scales 4-7
  }
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int h0 = (s.qh[l] >> (2 * c)) & 1, h1 = (s.qh[l] >> (2 * c + 1)) & 1;
      b.qs[32 * c + l] = static_cast<uint8_t>((8 * h0) | ((8 * h1) << 4));
    }
  }
}

void q5_k_rows(const BlockQ5_K* src, const Sink& sa, const Sink& sb, int64_t L, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ4_K a, bb;
    q5_k_to_q4_k(src[b], a, bb);
    sa.q4k(L, b, a);
    sb.q4k(L, b, bb);
  }
}

// The canonical MXFP4 chain with the f32 scale: acc = fma(P, 2^(e-128) * d_a, acc).
float mxfp4_row_ref(const BlockMxfp4* row, const uint8_t* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const int L = static_cast<int>(b % 16);
    const uint8_t* rec = a + static_cast<size_t>(b / 16) * kQ8GroupBytes;
    const auto* qa = reinterpret_cast<const int8_t*>(rec);
    const float da = reinterpret_cast<const float*>(rec + kQ8GroupD)[L];
    int sum = 0;
    for (int e = 0; e < 32; ++e) {
      const uint8_t byte = row[b].qs[e % 16];
      sum += kMxfp4Values[e < 16 ? byte & 0xF : byte >> 4] * qa[q8_group_pos(L, e)];
    }
    acc = std::fma(static_cast<float>(sum), e8m0_half_to_f32(row[b].e) * da, acc);
  }
  return acc;
}

// y[t * ldy + r] += tmp[t * 16 + r] for the chunk's n rows.
void add_chain(float* y, int64_t ldy, const float* tmp, int n_tokens, int64_t n) {
  for (int t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < n; ++r) y[t * ldy + r] = y[t * ldy + r] + tmp[t * 16 + r];
}

// Rows [r, r + n) of w rewritten into the sinks; exact[i]: row i's chain is
// the rewritten kernel's.
void convert_rows(GgmlType wtype, const uint8_t* w, size_t row_bytes, int64_t r, int64_t n,
                  int64_t nb, const Sink& s0, const Sink& s1, bool* exact) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = w + static_cast<size_t>(r + i) * row_bytes;
    exact[i] = true;
    switch (wtype) {
      case GgmlType::Q5_0:
        q5_0_to_q8_0(reinterpret_cast<const BlockQ5_0*>(src), s0, i, nb);
        break;
      case GgmlType::Q5_1:
        q5_1_to_q8_0(reinterpret_cast<const BlockQ5_1*>(src), s0, s1, i, nb);
        break;
      case GgmlType::MXFP4:
        exact[i] = mxfp4_to_q8_0(reinterpret_cast<const BlockMxfp4*>(src), s0, i, nb);
        break;
      default:
        q5_k_rows(reinterpret_cast<const BlockQ5_K*>(src), s0, s1, i, nb);
        break;
    }
  }
}

}  // namespace

bool is_converted_type(GgmlType t) {
  return t == GgmlType::Q5_0 || t == GgmlType::Q5_1 || t == GgmlType::Q5_K || t == GgmlType::MXFP4;
}

void matmul_converted(GgmlType wtype, const ConvertKernels& kern, const uint8_t* w,
                      size_t row_bytes, const Acts& acts, float* y, int64_t ldy, int64_t r0,
                      int64_t r1) {
  const bool k_quant = wtype == GgmlType::Q5_K;
  const bool two = wtype == GgmlType::Q5_1 || k_quant;
  const int64_t nb = acts.k / (k_quant ? 256 : 32);
  const size_t out_row =
      static_cast<size_t>(nb) * (k_quant ? sizeof(BlockQ4_K) : sizeof(BlockQ8_0));
  uint8_t* b0 = scratch(0, out_row * 16);
  uint8_t* b1 = scratch(1, out_row * 16);
  auto* tmp = reinterpret_cast<float*>(scratch(2, sizeof(float) * 16 * acts.n_tokens));
  const MatmulFn ggml = k_quant ? kern.q4_k : kern.q8_0;
  const MatmulFn p16 = k_quant ? kern.q4_k_p16 : kern.q8_0_p16;
  for (int64_t r = r0; r < r1; r += 16) {
    const int64_t n = std::min<int64_t>(16, r1 - r);
    const bool packed = n == 16 && p16 != nullptr;
    const MatmulFn fn = packed ? p16 : ggml;
    bool exact[16];
    convert_rows(wtype, w, row_bytes, r, n, nb, Sink{b0, out_row, packed},
                 Sink{b1, out_row, packed}, exact);
    fn(b0, out_row, acts, y + r, ldy, 0, n);
    if (two) {
      fn(b1, out_row, acts, tmp, 16, 0, n);
      add_chain(y + r, ldy, tmp, acts.n_tokens, n);
    }
    for (int64_t i = 0; i < n; ++i) {
      if (exact[i]) continue;
      const auto* row =
          reinterpret_cast<const BlockMxfp4*>(w + static_cast<size_t>(r + i) * row_bytes);
      for (int t = 0; t < acts.n_tokens; ++t)
        y[t * ldy + r + i] = mxfp4_row_ref(row, acts.row(t), nb);
    }
  }
}

}  // namespace epyctune::engine::kernels::detail
