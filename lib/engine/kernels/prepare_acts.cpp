// Activation quantization, once per matmul. The rule (per block of 32 for
// Q8_0-style, 256 for Q8_K-style): amax = max|x|, d = amax/127,
// q = nearbyint(x * (127/amax)) clamped to [-127, 127] (round half to even in
// the default FP environment). Only exact elementwise IEEE operations are
// used, so auto-vectorized builds produce the same bytes as the scalar one.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels {
namespace detail {
namespace {

// Quantizes n elements with one scale; returns d. q must hold n values.
template <class Q>
float quantize_group_scalar(const float* x, int n, Q* q) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < n; ++j) {
    float v = std::nearbyint(x[j] * id);
    v = std::min(127.0f, std::max(-127.0f, v));
    q[j] = static_cast<Q>(v);
  }
  return d;
}

// The AVX2 quantizer gives the same bytes; use it when the CPU has AVX2 and
// the active ISA allows it.
bool use_avx2() {
  return static_cast<int>(active_isa()) >= static_cast<int>(Isa::avx2);
}
float quantize_group(const float* x, int n, int8_t* q) {
  return use_avx2() ? quantize_group_i8_avx2(x, n, q) : quantize_group_scalar(x, n, q);
}
float quantize_group(const float* x, int n, int16_t* q) {
  return use_avx2() ? quantize_group_i16_avx2(x, n, q) : quantize_group_scalar(x, n, q);
}

}  // namespace

void prepare_acts_q8(GgmlType wtype, const float* x, int t0, int t1, int64_t k, Acts& out) {
  const int64_t nb = k / 32;
  const int64_t ng = q8_groups(k);
  const int32_t corr_mul = wtype == GgmlType::Q4_0 ? -8 : -128;
  for (int t = t0; t < t1; ++t) {
    uint8_t* row = out.data.data() + static_cast<size_t>(t) * out.row_bytes;
    const float* xt = x + static_cast<size_t>(t) * static_cast<size_t>(k);
    for (int64_t g = 0; g < ng; ++g) {
      uint8_t* rec = row + static_cast<size_t>(g) * kQ8GroupBytes;
      auto* qs = reinterpret_cast<int8_t*>(rec);
      auto* d = reinterpret_cast<float*>(rec + kQ8GroupD);
      auto* corr = reinterpret_cast<int32_t*>(rec + kQ8GroupCorr);
      for (int L = 0; L < 16; ++L) {
        const int64_t b = 16 * g + L;
        int8_t q[32] = {};
        d[L] = b < nb ? quantize_group(xt + b * 32, 32, q) : 0.0f;
        int sum = 0;
        for (int e = 0; e < 32; ++e) sum += q[e];
        for (int i = 0; i < 8; ++i) std::memcpy(qs + q8_group_pos(L, 4 * i), q + 4 * i, 4);
        corr[L] = corr_mul * sum;
      }
    }
  }
}

void prepare_acts_q4k(const float* x, int t0, int t1, int64_t k, Acts& out) {
  const int64_t nsb = k / 256;
  const int64_t np = q4k_pairs(k);
  for (int t = t0; t < t1; ++t) {
    uint8_t* row = out.data.data() + static_cast<size_t>(t) * out.row_bytes;
    const float* xt = x + static_cast<size_t>(t) * static_cast<size_t>(k);
    for (int64_t m = 0; m < np; ++m) {
      uint8_t* rec = row + static_cast<size_t>(m) * kQ4KPairBytes;
      auto* qs = reinterpret_cast<int8_t*>(rec);
      auto* d = reinterpret_cast<float*>(rec + kQ4KPairD);
      int16_t isum[16] = {};
      for (int h = 0; h < 2; ++h) {
        const int64_t b = 2 * m + h;
        int8_t q[256] = {};
        const float db = b < nsb ? quantize_group(xt + b * 256, 256, q) : 0.0f;
        for (int j = 0; j < 8; ++j) {
          const int L = 8 * h + j;
          d[L] = db;
          int sum = 0;
          for (int e = 0; e < 32; ++e) sum += q[32 * j + e];
          isum[8 * h + q4k_isum_slot(j)] = static_cast<int16_t>(sum);  // |sum| <= 32 * 127
          for (int i = 0; i < 8; ++i) {
            std::memcpy(qs + q4k_pair_pos(L, 4 * i), q + 32 * j + 4 * i, 4);
          }
        }
      }
      std::memcpy(rec + kQ4KPairIsum, isum, sizeof(isum));
      std::memset(rec + kQ4KPairIsum + sizeof(isum), 0,
                  kQ4KPairBytes - kQ4KPairIsum - sizeof(isum));
    }
  }
}

void prepare_acts_k(const float* x, int t0, int t1, int64_t k, Acts& out) {
  const int64_t nsb = k / 256;
  for (int t = t0; t < t1; ++t) {
    uint8_t* row = out.data.data() + static_cast<size_t>(t) * out.row_bytes;
    const float* xt = x + static_cast<size_t>(t) * static_cast<size_t>(k);
    for (int64_t b = 0; b < nsb; ++b) {
      uint8_t* rec = row + static_cast<size_t>(b) * kKBlockBytes;
      auto* q = reinterpret_cast<int16_t*>(rec);
      auto* d = reinterpret_cast<float*>(rec + kKBlockD);
      *d = quantize_group(xt + b * 256, 256, q);
    }
  }
}

}  // namespace detail

void prepare_acts_shape(GgmlType weight_type, int n_tokens, int64_t k, Acts& out) {
  using namespace detail;
  if (n_tokens < 0 || k <= 0) {
    throw std::invalid_argument("prepare_acts: bad shape n_tokens=" + std::to_string(n_tokens) +
                                " k=" + std::to_string(k));
  }
  Geometry g{};
  if (!geometry(weight_type, g) || weight_type == GgmlType::Q8_K) {
    throw std::invalid_argument("prepare_acts: unsupported weight type " +
                                std::to_string(static_cast<uint32_t>(weight_type)));
  }
  if (k % g.block_elems != 0) {
    throw std::invalid_argument("prepare_acts: k=" + std::to_string(k) +
                                " is not a multiple of the block size " +
                                std::to_string(g.block_elems));
  }
  out.weight_type = weight_type;
  out.n_tokens = n_tokens;
  out.k = k;
  switch (weight_type) {
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q5_0:  // these three run the Q8_0 kernels (convert_matmul.cpp)
    case GgmlType::Q5_1:
    case GgmlType::MXFP4:
      out.vec_type = GgmlType::Q8_0;
      out.row_bytes = acts_q8_row_bytes(k);
      break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:  // runs the Q4_K kernels (convert_matmul.cpp)
      out.vec_type = GgmlType::Q8_K;
      out.row_bytes = acts_q4k_row_bytes(k);
      break;
    case GgmlType::Q6_K:
      out.vec_type = GgmlType::Q8_K;
      out.row_bytes = acts_k_row_bytes(k);
      break;
    default:
      out.vec_type = GgmlType::F32;
      out.row_bytes = acts_row_stride(static_cast<size_t>(k) * 4);
      break;
  }
  const size_t need = out.row_bytes * static_cast<size_t>(n_tokens);
  if (out.data.size() < need) out.data.resize(need);
}

void prepare_acts_rows(const float* x, int t0, int t1, Acts& out) {
  using namespace detail;
  if (t0 < 0 || t1 > out.n_tokens || t0 > t1)
    throw std::out_of_range("prepare_acts_rows: rows [" + std::to_string(t0) + ", " +
                            std::to_string(t1) + ") of " + std::to_string(out.n_tokens));
  const int64_t k = out.k;
  switch (out.vec_type) {
    case GgmlType::Q8_0:
      prepare_acts_q8(out.weight_type, x, t0, t1, k, out);
      break;
    case GgmlType::Q8_K:
      if (out.weight_type == GgmlType::Q4_K || out.weight_type == GgmlType::Q5_K) {
        prepare_acts_q4k(x, t0, t1, k, out);
      } else {
        prepare_acts_k(x, t0, t1, k, out);
      }
      break;
    default:
      for (int t = t0; t < t1; ++t) {
        std::memcpy(out.data.data() + static_cast<size_t>(t) * out.row_bytes,
                    x + static_cast<size_t>(t) * static_cast<size_t>(k),
                    static_cast<size_t>(k) * 4);
      }
      break;
  }
}

void prepare_acts(GgmlType weight_type, const float* x, int n_tokens, int64_t k, Acts& out) {
  prepare_acts_shape(weight_type, n_tokens, k, out);
  prepare_acts_rows(x, 0, n_tokens, out);
}

}  // namespace epyctune::engine::kernels
