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
#include "engine/kernels/convert_rows.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

using Scratch = std::vector<uint8_t, AlignedAllocator<uint8_t>>;

uint8_t* scratch(int slot, size_t bytes) {
  thread_local Scratch bufs[3];
  if (bufs[slot].size() < bytes) bufs[slot].resize(bytes);
  return bufs[slot].data();
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
  const MatmulFn fn = k_quant ? kern.q4_k : kern.q8_0;
  const bool avx2 = static_cast<int>(active_isa()) >= static_cast<int>(Isa::avx2);
  for (int64_t r = r0; r < r1; r += 16) {
    const int64_t n = std::min<int64_t>(16, r1 - r);
    bool exact[16];
    if (avx2)
      convert_rows_avx2(wtype, w, row_bytes, r, n, nb, b0, b1, out_row, exact);
    else
      convert_rows<ExpandScalar>(wtype, w, row_bytes, r, n, nb, Sink{b0, out_row},
                                 Sink{b1, out_row}, exact);
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
