// What ggml's reference quantizers share (quantize_ref.cpp, quantize_q5.cpp),
// and the entry points of the 5-bit / MXFP4 quantizers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/kernels/blocks.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

// ggml's nearest_int: round half to even for |x| < 2^22 via the 1.5*2^23 trick.
inline int nearest_int(float fval) {
  const float val = fval + 12582912.f;
  int i;
  std::memcpy(&i, &val, sizeof(int));
  return (i & 0x007fffff) - 0x00400000;
}

// The element of largest magnitude, with its sign (the first on ties): the
// symmetric quantizers scale by it so that it lands on the grid's end.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = x[j] < 0 ? -x[j] : x[j];
    if (amax < a) {
      amax = a;
      max = x[j];
    }
  }
  return max;
}

// The levels of a K-quant super-block (256 values) under the 6-bit scales
// and mins already packed in `scales`, clamped to [0, max_level]: Q4_K's
// (15) and Q5_K's (31) final pass. A sub-block whose scale is 0 keeps L.
inline void k_quant_levels(const float* x, const uint8_t* scales, uint16_t d16, uint16_t dmin16,
                           uint8_t* L, int max_level) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4k_scale_min(j, scales, sc, m);
    const float d = fp16_to_f32(d16) * sc;
    if (d == 0.0f) continue;
    const float dm = fp16_to_f32(dmin16) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(max_level, l)));
    }
  }
}

}  // namespace

// ggml's make_qkx2_quants (no MAD): a sub-block's scale and min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep);

// ggml's quantize_row_*_ref / dequantize_row_* for Q5_0, Q5_1, Q5_K, MXFP4;
// nb blocks (super-blocks for Q5_K). nstep: Q5_K's scale search (15: ggml's;
// 0: min-max, for large test models).
void quantize_q5_0(const float* x, void* y, int64_t nb);
void quantize_q5_1(const float* x, void* y, int64_t nb);
void quantize_q5_K(const float* x, void* y, int64_t nb, int nstep);
void quantize_mxfp4(const float* x, void* y, int64_t nb);
void dequantize_q5_0(const void* x, float* y, int64_t nb);
void dequantize_q5_1(const void* x, float* y, int64_t nb);
void dequantize_q5_K(const void* x, float* y, int64_t nb);
void dequantize_mxfp4(const void* x, float* y, int64_t nb);

}  // namespace epyctune::engine::kernels::detail
