// Elementwise and reduction ops on f32. One implementation for every ISA:
// this file is compiled without fast-math and with -ffp-contract=off, and
// reductions use 16 explicit stripes plus reduce16(), so results depend only
// on the inputs (the compiler may vectorize the stripes, never reassociate).
#include <cmath>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/kernels/vec_math.hpp"

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

// At W = 1, attend_shared runs attend_lanes per query; reduce_stripes
// serves attend_pages' tiles.
EPYCTUNE_VEC_MATH_DEFINE(
    ref, 1, [](const float* a) { return reduce16(a); },
    [](const uint16_t* p) { return fp16_to_f32(*p); })

}  // namespace detail

namespace {

// An op's copy for the active ISA (both AVX-512 levels share one).
template <class Fn>
Fn for_isa(Fn ref, Fn avx2, Fn avx512) {
  switch (active_isa()) {
    case Isa::avx512:
    case Isa::avx512vnni:
      return avx512;
    case Isa::avx2:
      return avx2;
    default:
      return ref;
  }
}

}  // namespace

// Attention makes one call per head, not a dot_f32 / axpy per cached
// position, and the exp-based ops use a vector exp rather than libm's expf
// per element: both are in every token's path.
float dot_f32(const float* a, const float* b, int64_t n) {
  return for_isa(detail::dot_f32_ref, detail::dot_f32_avx2, detail::dot_f32_avx512)(a, b, n);
}

void axpy(float* y, float a, const float* x, int64_t n) {
  for_isa(detail::axpy_ref, detail::axpy_avx2, detail::axpy_avx512)(y, a, x, n);
}

float exp_f32(float x) {
  return detail::exp_lanes<1>(x);
}

void softmax(float* x, int64_t n) {
  for_isa(detail::softmax_ref, detail::softmax_avx2, detail::softmax_avx512)(x, n);
}

void silu_mul(float* gate_inout, const float* up, int64_t n) {
  for_isa(detail::silu_mul_ref, detail::silu_mul_avx2, detail::silu_mul_avx512)(gate_inout, up, n);
}

void attend(const float* q, const float* keys, const float* vals, int64_t n, int64_t hd,
            float scale, float* scores, float* out) {
  for_isa(detail::attend_ref, detail::attend_avx2, detail::attend_avx512)(q, keys, vals, n, hd,
                                                                          scale, scores, out);
}

void attend_shared(const float* const* q, const int64_t* ns, int nq, const float* keys,
                   const float* vals, int64_t hd, float scale, float* scores, float* const* out) {
  for_isa(detail::attend_shared_ref, detail::attend_shared_avx2, detail::attend_shared_avx512)(
      q, ns, nq, keys, vals, hd, scale, scores, out);
}

bool attend_pages_supported(int64_t hd) {
  return hd == 64 || hd == 128;
}

void attend_pages(const float* const* q, const int64_t* ns, int nq, const uint16_t* const* kpages,
                  const uint16_t* const* vpages, int64_t hd, float scale, float* scores,
                  float* const* out) {
  for_isa(detail::attend_pages_ref, detail::attend_pages_avx2, detail::attend_pages_avx512)(
      q, ns, nq, kpages, vpages, hd, scale, scores, out);
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
