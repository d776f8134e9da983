// F32 / F16 / BF16 weights against f32 activations, written once over the
// vector width: float_avx2.cpp and float_avx512.cpp instantiate it with their
// Isa (8 or 16 lanes). A step of 16 elements is 16 / W vectors, vector h the
// scalar reference's stripes h*W .. h*W+W-1 (element i goes to stripe i % 16);
// the tail adds only its n elements' products, so every stripe sees exactly
// the reference's fmas in the reference's order, and Isa::reduce applies the
// canonical reduce16 tree.
//
// Isa: V (the vector), kLanes, kMaxTokens, zero(), load_w<F>(row, i, n) and
// load_x(p, n) (n >= kLanes: a full vector, else the first n, rest zero),
// fma(a, b, c), fma_first(a, b, c, n) (lanes < n: fma, others: c), and
// reduce(const V acc[16 / kLanes]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tile_driver.hpp"

namespace epyctune::engine::kernels::detail {
// Internal linkage: this header is compiled into TUs with different ISA
// flags, and one TU must never call another TU's copy.
namespace {

enum class FloatType { f32, f16, bf16 };

template <class Isa, FloatType kF, int T>
void float_row_tile(const uint8_t* row, int64_t k, const float* const* x, float* out) {
  constexpr int W = Isa::kLanes, H = 16 / W;
  using V = typename Isa::V;
  V acc[T][H];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) acc[t][h] = Isa::zero();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    V w[H];
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) w[h] = Isa::template load_w<kF>(row, i + W * h, W);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h)
        acc[t][h] = Isa::fma(w[h], Isa::load_x(x[t] + i + W * h, W), acc[t][h]);
  }
  if (i < k) {
    const int rest = static_cast<int>(k - i);
    for (int h = 0; h < H; ++h) {
      const int n = rest - W * h;
      if (n <= 0) break;
      const V w = Isa::template load_w<kF>(row, i + W * h, n);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[t][h] = Isa::fma_first(w, Isa::load_x(x[t] + i + W * h, n), acc[t][h], n);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = Isa::reduce(acc[t]);
}

template <class Isa, FloatType kF>
void float_matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  drive_tiles<Isa::kMaxTokens, float>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* row, const float* const* rows, float* out) {
        float_row_tile<Isa, kF, decltype(T)::value>(row, acts.k, rows, out);
      });
}

template <class Isa>
void fill_float_table(MatmulTable& t) {
  t.f32 = float_matmul<Isa, FloatType::f32>;
  t.f16 = float_matmul<Isa, FloatType::f16>;
  t.bf16 = float_matmul<Isa, FloatType::bf16>;
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail
