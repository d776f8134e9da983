// Repacking Q4_0 / Q8_0 weight rows into the packed16 layout (blocks.hpp) and
// back. Pure byte permutations: a packed row holds exactly the bytes of the
// ggml row, so the matmul results cannot change, only the load pattern.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;
using detail::kPackBlocks;
using detail::kPackD;

size_t block_bytes(GgmlType t) {
  if (t == GgmlType::Q4_0) return sizeof(BlockQ4_0);
  if (t == GgmlType::Q8_0) return sizeof(BlockQ8_0);
  throw std::invalid_argument("packed16 layout: no packed form for weight type " +
                              std::to_string(static_cast<uint32_t>(t)));
}

// One group of n (<= 16) blocks: ggml (src) -> packed (dst) or back. A full
// group is n = 16; the short last group of a row packs the same way with
// stride 4n per chunk, so every row is packed end to end.
void permute_group(size_t bb, int n, const uint8_t* src, uint8_t* dst, bool to_packed) {
  const size_t qbytes = bb - 2;
  const size_t nn = static_cast<size_t>(n);
  for (size_t L = 0; L < nn; ++L) {
    const size_t blk = L * bb;
    if (to_packed)
      std::memcpy(dst + 2 * L, src + blk, 2);
    else
      std::memcpy(dst + blk, src + 2 * L, 2);
    for (size_t i = 0; i < qbytes / 4; ++i) {
      const size_t p = 2 * nn + 4 * nn * i + 4 * L;
      const size_t g = blk + 2 + 4 * i;
      if (to_packed)
        std::memcpy(dst + p, src + g, 4);
      else
        std::memcpy(dst + g, src + p, 4);
    }
  }
}

void permute_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k,
                  bool to_packed) {
  const size_t bb = block_bytes(t);
  const int64_t nb = k / 32;
  uint8_t tmp[kPackBlocks * sizeof(BlockQ8_0)];
  auto* base = static_cast<uint8_t*>(rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = base + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < nb; b += kPackBlocks) {
      const int n = static_cast<int>(std::min<int64_t>(kPackBlocks, nb - b));
      uint8_t* grp = row + static_cast<size_t>(b) * bb;
      std::memcpy(tmp, grp, bb * static_cast<size_t>(n));
      permute_group(bb, n, tmp, grp, to_packed);
    }
  }
}

}  // namespace

bool has_packed_layout(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q8_0;
}

void pack_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k) {
  permute_rows(t, rows, row_bytes, n_rows, k, true);
}

void unpack_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k) {
  permute_rows(t, rows, row_bytes, n_rows, k, false);
}

}  // namespace epyctune::engine::kernels
