// ggml's reference quantizers and dequantizers for Q5_0, Q5_1, Q5_K and
// MXFP4 (ggml-quants.c), operation for operation, so the files mkmodel writes
// decode in ggml-based tools as they decode here.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/quant_helpers.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

// Low nibbles in qs[j], high nibbles of elements 16..31, fifth bits in qh.
void pack_q5(const int* q, uint8_t* qs, uint8_t* qh_out) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= ((static_cast<uint32_t>(q[j]) & 0x10u) >> 4) << j;
    qh |= ((static_cast<uint32_t>(q[j + 16]) & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

// ggml's best_index_mxfp4: the first of the nearest values.
int best_index_mxfp4(float x, float e) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Values[0] * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Values[i] * e - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

// Q4_K's 6-bit packing of 8 scales and 8 mins into 12 bytes (Q5_K shares it).
void pack_scales_k(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j - 0] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q5_K's sub-block scales and mins (make_qkx2_quants over 31 levels) into y.
void q5k_scales(const float* x, BlockQ5_K& y, uint8_t* L, int nstep) {
  float mins[8], scales[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.5f,
                                 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
  }
  pack_scales_k(ls, lm, y.scales);
  y.d = f32_to_fp16(max_scale / 63.f);
  y.dmin = f32_to_fp16(max_min / 63.f);
}

}  // namespace

void quantize_q5_0(const float* x, void* out, int64_t nb) {
  auto* y = static_cast<BlockQ5_0*>(out);
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const float max = signed_absmax(x, 32);
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    int q[32];
    for (int j = 0; j < 32; ++j)
      q[j] = std::min(
          31, static_cast<int>(static_cast<uint8_t>(static_cast<int8_t>(x[j] * id + 16.5f))));
    pack_q5(q, y[i].qs, y[i].qh);
  }
}

void quantize_q5_1(const float* x, void* out, int64_t nb) {
  auto* y = static_cast<BlockQ5_1*>(out);
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      min = x[j] < min ? x[j] : min;
      max = x[j] > max ? x[j] : max;
    }
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(min);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    pack_q5(q, y[i].qs, y[i].qh);
  }
}

void quantize_q5_K(const float* x, void* out, int64_t nb, int nstep) {
  auto* y = static_cast<BlockQ5_K*>(out);
  uint8_t L[256];
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    q5k_scales(x, y[i], L, nstep);
    k_quant_levels(x, y[i].scales, y[i].d, y[i].dmin, L, 31);
    std::memset(y[i].qh, 0, 32);
    for (int j = 0; j < 8; ++j) {  // sub-block j: nibbles of chunk j / 2, qh bit j
      uint8_t* ql = y[i].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int q = L[32 * j + l];
        if (j % 2 == 0)
          ql[l] = static_cast<uint8_t>(q & 0xF);
        else
          ql[l] = static_cast<uint8_t>(ql[l] | ((q & 0xF) << 4));
        if (q > 15) y[i].qh[l] = static_cast<uint8_t>(y[i].qh[l] | (1u << j));
      }
    }
  }
}

void quantize_mxfp4(const float* x, void* out, int64_t nb) {
  auto* y = static_cast<BlockMxfp4*>(out);
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = e8m0_half_to_f32(e);
    y[i].e = e;
    for (int j = 0; j < 16; ++j) {
      y[i].qs[j] =
          static_cast<uint8_t>(best_index_mxfp4(x[j], d) | (best_index_mxfp4(x[j + 16], d) << 4));
    }
  }
}

void dequantize_q5_0(const void* in, float* y, int64_t nb) {
  const auto* x = static_cast<const BlockQ5_0*>(in);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_quant(x[i].qs, x[i].qh, j) - 16) * d;
  }
}

void dequantize_q5_1(const void* in, float* y, int64_t nb) {
  const auto* x = static_cast<const BlockQ5_1*>(in);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_quant(x[i].qs, x[i].qh, j)) * d + m;
  }
}

void dequantize_q5_K(const void* in, float* y, int64_t nb) {
  const auto* x = static_cast<const BlockQ5_K*>(in);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d), min = fp16_to_f32(x[i].dmin);
    for (int j = 0; j < 8; ++j, y += 32) {
      uint8_t sc, m;
      q4k_scale_min(j, x[i].scales, sc, m);
      const float d1 = d * sc, m1 = min * m;
      const uint8_t* ql = x[i].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int lo = j % 2 == 0 ? ql[l] & 0xF : ql[l] >> 4;
        const int hi = (x[i].qh[l] >> j) & 1 ? 16 : 0;
        y[l] = d1 * static_cast<float>(lo + hi) - m1;
      }
    }
  }
}

void dequantize_mxfp4(const void* in, float* y, int64_t nb) {
  const auto* x = static_cast<const BlockMxfp4*>(in);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = e8m0_half_to_f32(x[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = kMxfp4Values[x[i].qs[j] & 0xF] * d;
      y[j + 16] = kMxfp4Values[x[i].qs[j] >> 4] * d;
    }
  }
}

}  // namespace epyctune::engine::kernels::detail
