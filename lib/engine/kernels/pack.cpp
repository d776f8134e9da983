// Repacking Q4_0 / Q8_0 weight rows into the packed16 layout (blocks.hpp) and
// back. Pure byte permutations: a packed row holds exactly the bytes of the
// ggml row, so the matmul results cannot change, only the load pattern.
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

// One group of 16 blocks: ggml (src) -> packed (dst) or back.
void permute_group(size_t bb, const uint8_t* src, uint8_t* dst, bool to_packed) {
  const size_t qbytes = bb - 2;
  for (int L = 0; L < kPackBlocks; ++L) {
    const size_t blk = static_cast<size_t>(L) * bb;
    const size_t d_at = 2 * static_cast<size_t>(L);
    if (to_packed)
      std::memcpy(dst + d_at, src + blk, 2);
    else
      std::memcpy(dst + blk, src + d_at, 2);
    for (size_t i = 0; i < qbytes / 4; ++i) {
      const size_t p = kPackD + 64 * i + 4 * static_cast<size_t>(L);
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
  const int64_t groups = k / 32 / kPackBlocks;
  const size_t gbytes = bb * kPackBlocks;
  uint8_t tmp[kPackBlocks * sizeof(BlockQ8_0)];
  auto* base = static_cast<uint8_t*>(rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = base + static_cast<size_t>(r) * row_bytes;
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* grp = row + static_cast<size_t>(g) * gbytes;
      std::memcpy(tmp, grp, gbytes);
      permute_group(bb, tmp, grp, to_packed);
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
