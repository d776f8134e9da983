// The F32 / F16 / BF16 matmul entries of one ISA, written once: the row-tile
// driver over 1..kMaxTokens tokens and the table slots. Each ISA's file keeps
// its own row tile (the hot loop), so this header adds no code to it and the
// instantiation happens in that file, under its target flags.
#pragma once

#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/tile_driver.hpp"

namespace epyctune::engine::kernels::detail {

enum class FloatWeights { f32, f16, bf16 };

// Tile::run<kF, T>(row, k, token_rows, out) computes T dot products of one
// weight row against T activation rows.
template <class Tile, int kMaxTokens, FloatWeights kF>
void float_matmul(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  drive_tiles<kMaxTokens, float>(
      w, w_row_bytes, acts, y, ldy, r0, r1,
      [&](auto T, const uint8_t* row, const float* const* rows, float* out) {
        Tile::template run<kF, decltype(T)::value>(row, acts.k, rows, out);
      });
}

template <class Tile, int kMaxTokens>
void fill_float_entries(MatmulTable& t) {
  t.f32 = float_matmul<Tile, kMaxTokens, FloatWeights::f32>;
  t.f16 = float_matmul<Tile, kMaxTokens, FloatWeights::f16>;
  t.bf16 = float_matmul<Tile, kMaxTokens, FloatWeights::bf16>;
}

}  // namespace epyctune::engine::kernels::detail
