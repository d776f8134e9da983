// ggml's reference quantizers and dequantizers, arithmetic for arithmetic, so
// files we write load in ggml-based tools and files they write dequantize to
// the same floats here. Row-wise and allocation-free, so callers can quantize
// rows in parallel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/kernels/quant_helpers.hpp"

namespace epyctune::engine::kernels {
namespace {

using namespace detail;

constexpr float kGroupMaxEps = 1e-15f;

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const float max = signed_absmax(x, 32);
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[16 + j] * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

}  // namespace

// ggml's make_qkx2_quants: scale + min for one group, searching nstep+1
// candidate inverse scales around nmax/(max-min) by weighted least squares.
float detail::make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                               float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

namespace {

using namespace detail;

// ggml's make_qx_quants with rmse_type 1 and no importance weights (w = x^2):
// symmetric quants in [-nmax, nmax-1] (stored +nmax), best of 19 scales.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t nb, int nstep) {
  uint8_t L[256], Laux[32];
  float weights[32], mins[8], scales[8];
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f,
                                   0.1f, nstep);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(y[i].scales, 0, 12);
    for (int j = 0; j < 8; ++j) {
      uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
      uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
      ls = std::min<uint8_t>(63, ls);
      lm = std::min<uint8_t>(63, lm);
      if (j < 4) {
        y[i].scales[j] = ls;
        y[i].scales[j + 4] = lm;
      } else {
        y[i].scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y[i].scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        y[i].scales[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    y[i].d = f32_to_fp16(max_scale / 63.f);
    y[i].dmin = f32_to_fp16(max_min / 63.f);
    k_quant_levels(x, y[i].scales, y[i].d, y[i].dmin, L, 15);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < 256; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[256];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_fp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_f32(y[i].d) * y[i].scales[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l + 0] & 0xF;
        const int q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF;
        const int q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float max = 0, amax = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void dequantize_q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = fp16_to_f32(x[i].d);
    const float min = fp16_to_f32(x[i].dmin);
    for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2) {
      uint8_t sc, m;
      q4k_scale_min(is + 0, x[i].scales, sc, m);
      const float d1 = d * sc, m1 = min * m;
      q4k_scale_min(is + 1, x[i].scales, sc, m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequantize_q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        // ggml evaluates d * sc * q left to right in float.
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void check_n(GgmlType t, int64_t n, const char* what) {
  Geometry g{};
  if (!geometry(t, g)) {
    throw std::invalid_argument(std::string(what) + ": unsupported ggml type " +
                                std::to_string(static_cast<uint32_t>(t)));
  }
  if (n < 0 || n % g.block_elems != 0) {
    throw std::invalid_argument(std::string(what) + ": n=" + std::to_string(n) +
                                " is not a multiple of the block size " +
                                std::to_string(g.block_elems));
  }
}

}  // namespace

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  quantize_row(t, src, dst, n, QuantSearch::ggml);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n, QuantSearch search) {
  check_n(t, n, "quantize_row");
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_fp16(src[i]);
      return;
    }
    case GgmlType::BF16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(src[i]);
      return;
    }
    case GgmlType::Q4_0:
      return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n / 32);
    case GgmlType::Q8_0:
      return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n / 32);
    case GgmlType::Q4_K:
      // ggml searches 21 scales per sub-block; min-max is ~20x faster.
      return quantize_q4_K(src, static_cast<BlockQ4_K*>(dst), n / 256,
                           search == QuantSearch::ggml ? 20 : 0);
    case GgmlType::Q6_K:
      return quantize_q6_K(src, static_cast<BlockQ6_K*>(dst), n / 256);
    case GgmlType::Q8_K:
      return quantize_q8_K(src, static_cast<BlockQ8_K*>(dst), n / 256);
    case GgmlType::Q5_0:
      return quantize_q5_0(src, dst, n / 32);
    case GgmlType::Q5_1:
      return quantize_q5_1(src, dst, n / 32);
    case GgmlType::Q5_K:
      return quantize_q5_K(src, dst, n / 256, search == QuantSearch::ggml ? 15 : 0);
    case GgmlType::MXFP4:
      return quantize_mxfp4(src, dst, n / 32);
  }
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  check_n(t, n, "dequantize_row");
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case GgmlType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case GgmlType::Q4_0: {
      const auto* x = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < n / 32; ++i, dst += 32) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < 16; ++j) {
          dst[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
          dst[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case GgmlType::Q8_0: {
      const auto* x = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / 32; ++i, dst += 32) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(x[i].qs[j]) * d;
      }
      return;
    }
    case GgmlType::Q4_K:
      return dequantize_q4_K(static_cast<const BlockQ4_K*>(src), dst, n / 256);
    case GgmlType::Q6_K:
      return dequantize_q6_K(static_cast<const BlockQ6_K*>(src), dst, n / 256);
    case GgmlType::Q8_K: {
      const auto* x = static_cast<const BlockQ8_K*>(src);
      for (int64_t i = 0; i < n / 256; ++i, dst += 256) {
        for (int j = 0; j < 256; ++j) dst[j] = x[i].d * x[i].qs[j];
      }
      return;
    }
    case GgmlType::Q5_0:
      return dequantize_q5_0(src, dst, n / 32);
    case GgmlType::Q5_1:
      return dequantize_q5_1(src, dst, n / 32);
    case GgmlType::Q5_K:
      return dequantize_q5_K(src, dst, n / 256);
    case GgmlType::MXFP4:
      return dequantize_mxfp4(src, dst, n / 32);
  }
}

}  // namespace epyctune::engine::kernels
