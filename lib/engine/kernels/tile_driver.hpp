// The loop every SIMD matmul shares: token chunks of up to kMax, one row at a
// time, and a row tile instantiated per token count so its accumulators stay
// in registers. Internal linkage: each ISA TU compiles its own copy with its
// own flags, and one TU must never call another TU's copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "engine/kernels/kernels.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

template <int T, int kMax, typename Row, typename Tile>
[[gnu::always_inline]] inline void tile_for(int nt, const Tile& tile, const uint8_t* row,
                                            const Row* const* arows, float* out) {
  if constexpr (T < kMax) {
    if (nt == T) return tile(std::integral_constant<int, T>{}, row, arows, out);
    return tile_for<T + 1, kMax>(nt, tile, row, arows, out);
  } else {
    tile(std::integral_constant<int, kMax>{}, row, arows, out);
  }
}

// y[t * ldy + r] for rows [r0, r1): tile(T, row, arows, out) computes one row
// for T tokens (arows[0..T) are the prepared activation rows, as Row*).
template <int kMax, typename Row, typename Tile>
inline void drive_tiles(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y,
                        int64_t ldy, int64_t r0, int64_t r1, const Tile& tile) {
  for (int t0 = 0; t0 < acts.n_tokens; t0 += kMax) {
    const int nt = std::min(acts.n_tokens - t0, kMax);
    const Row* arows[kMax];
    for (int t = 0; t < nt; ++t) arows[t] = reinterpret_cast<const Row*>(acts.row(t0 + t));
    float out[kMax];
    for (int64_t r = r0; r < r1; ++r) {
      tile_for<1, kMax>(nt, tile, w + static_cast<size_t>(r) * w_row_bytes, arows, out);
      for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r] = out[t];
    }
  }
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail
