// Elementwise and reduction ops on f32. One implementation for every ISA:
// this file is compiled without fast-math and with -ffp-contract=off, and
// reductions use 16 explicit stripes plus reduce16(), so results depend only
// on the inputs (the compiler may vectorize the stripes, never reassociate).
#include <cmath>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/kernels.hpp"

namespace epyctune::engine::kernels {
namespace {

float sum_squares(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j] * x[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += x[i] * x[i];
  return detail::reduce16(acc);
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  const float mean = sum_squares(x, n) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) {
      x[i + j] = std::exp(x[i + j] - max);
      acc[j] += x[i + j];
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    x[i] = std::exp(x[i] - max);
    acc[j] += x[i];
  }
  const float inv = 1.0f / detail::reduce16(acc);
  for (int64_t k = 0; k < n; ++k) x[k] *= inv;
}

void silu_mul(float* gate_inout, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate_inout[i];
    gate_inout[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

namespace detail {

float dot_f32_ref(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  return reduce16(acc);
}

void axpy_ref(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace detail

// Attention calls these per cached position: scalar, they were 5% of an
// 8-token 7B verify pass.
float dot_f32(const float* a, const float* b, int64_t n) {
  switch (active_isa()) {
    case Isa::avx512:
    case Isa::avx512vnni:
      return detail::dot_f32_avx512(a, b, n);
    case Isa::avx2:
      return detail::dot_f32_avx2(a, b, n);
    default:
      return detail::dot_f32_ref(a, b, n);
  }
}

void axpy(float* y, float a, const float* x, int64_t n) {
  switch (active_isa()) {
    case Isa::avx512:
    case Isa::avx512vnni:
      return detail::axpy_avx512(y, a, x, n);
    case Isa::avx2:
      return detail::axpy_avx2(y, a, x, n);
    default:
      return detail::axpy_ref(y, a, x, n);
  }
}

// theta_i = pos * freq_scale * freq_base^(-2i/n_rot), computed in double and
// cached per thread for the last (pos, n_rot, base, scale), since every head
// of a token rotates by the same angles.
void rope(float* head, int head_dim, int n_rot, int pos, float freq_base, float freq_scale,
          bool neox) {
  struct Cache {
    int pos = -1, n_rot = -1;
    float base = 0, scale = 0;
    std::vector<float> cs;  // cos, sin pairs
  };
  thread_local Cache c;
  if (n_rot > head_dim) n_rot = head_dim;
  const int half = n_rot / 2;
  if (c.pos != pos || c.n_rot != n_rot || c.base != freq_base || c.scale != freq_scale) {
    c.cs.resize(static_cast<size_t>(half) * 2);
    for (int i = 0; i < half; ++i) {
      const double theta = static_cast<double>(pos) * static_cast<double>(freq_scale) *
                           std::pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
      c.cs[2 * i] = static_cast<float>(std::cos(theta));
      c.cs[2 * i + 1] = static_cast<float>(std::sin(theta));
    }
    c.pos = pos;
    c.n_rot = n_rot;
    c.base = freq_base;
    c.scale = freq_scale;
  }
  for (int i = 0; i < half; ++i) {
    const int i0 = neox ? i : 2 * i;
    const int i1 = neox ? i + half : 2 * i + 1;
    const float cos = c.cs[2 * i], sin = c.cs[2 * i + 1];
    const float x0 = head[i0], x1 = head[i1];
    head[i0] = x0 * cos - x1 * sin;
    head[i1] = x0 * sin + x1 * cos;
  }
}

}  // namespace epyctune::engine::kernels
