// Repacking Q4_0 / Q8_0 / Q4_K weight rows into the packed16 layout
// (blocks.hpp: 16-row panels) and back. Pure byte permutations: a panel holds
// exactly the information of its 16 ggml rows, so the matmul results cannot
// change, only the load pattern.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ4_K;
using detail::BlockQ8_0;
using detail::kPackD;

// Every full panel of 16 rows, ggml (src) -> packed (dst) or back
// (blocks.hpp); the rows after the last full panel keep ggml's layout.
void permute_panels(GgmlType t, uint8_t* base, size_t row_bytes, int64_t n_rows, int64_t k,
                    bool to_packed) {
  const bool kq = t == GgmlType::Q4_K;
  const size_t bb = kq                    ? sizeof(BlockQ4_K)
                    : t == GgmlType::Q4_0 ? sizeof(BlockQ4_0)
                                          : sizeof(BlockQ8_0);
  const auto nb = static_cast<size_t>(k / (kq ? 256 : 32));
  if (row_bytes != nb * bb)
    throw std::invalid_argument("packed16 layout: rows of " + std::to_string(row_bytes) +
                                " bytes, expected " + std::to_string(nb * bb) +
                                " for k = " + std::to_string(k) + " (rows must be contiguous)");
  const size_t panel = detail::kPanelRows * row_bytes;
  std::vector<uint8_t> tmp(panel);
  for (int64_t p = 0; p + detail::kPanelRows <= n_rows; p += detail::kPanelRows) {
    uint8_t* P = base + static_cast<size_t>(p) * row_bytes;
    std::memcpy(tmp.data(), P, panel);
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* packed = (to_packed ? P : tmp.data()) + b * detail::kPanelRows * bb;
      for (size_t L = 0; L < static_cast<size_t>(detail::kPanelRows); ++L) {
        uint8_t* ggml = (to_packed ? tmp.data() : P) + L * row_bytes + b * bb;
        auto move = [&](size_t p_off, size_t g_off, size_t n) {
          if (to_packed)
            std::memcpy(packed + p_off, ggml + g_off, n);
          else
            std::memcpy(ggml + g_off, packed + p_off, n);
        };
        if (kq) {  // dword q of the block -> vector q
          for (size_t q = 0; q < bb / 4; ++q) move(64 * q + 4 * L, 4 * q, 4);
        } else {  // the fp16 scale, then the quants' dwords
          move(2 * L, 0, 2);
          for (size_t i = 0; i < (bb - 2) / 4; ++i) move(kPackD + 64 * i + 4 * L, 2 + 4 * i, 4);
        }
      }
    }
  }
}

void permute_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k,
                  bool to_packed) {
  if (!has_packed_layout(t))
    throw std::invalid_argument("packed16 layout: no packed form for weight type " +
                                std::to_string(static_cast<uint32_t>(t)));
  permute_panels(t, static_cast<uint8_t*>(rows), row_bytes, n_rows, k, to_packed);
}

}  // namespace

bool has_packed_layout(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q8_0 || t == GgmlType::Q4_K;
}

void pack_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k) {
  permute_rows(t, rows, row_bytes, n_rows, k, true);
}

void unpack_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k) {
  permute_rows(t, rows, row_bytes, n_rows, k, false);
}

void dequantize_packed_row(GgmlType t, const void* rows, size_t row_bytes, int64_t n_rows,
                           int64_t k, int64_t r, float* out) {
  if (r < 0 || r >= n_rows)
    throw std::out_of_range("dequantize_packed_row: row " + std::to_string(r) + " of " +
                            std::to_string(n_rows));
  const auto* base = static_cast<const uint8_t*>(rows);
  const int64_t panel = r / detail::kPanelRows * detail::kPanelRows;
  if (panel + detail::kPanelRows > n_rows) {  // the ggml-layout tail
    dequantize_row(t, base + static_cast<size_t>(r) * row_bytes, out, k);
    return;
  }
  // One panel unpacked in a scratch copy: a few microseconds per looked-up token.
  const uint8_t* rows16 = detail::unpacked_copy(t, base + static_cast<size_t>(panel) * row_bytes,
                                                row_bytes, detail::kPanelRows, k);
  dequantize_row(t, rows16 + static_cast<size_t>(r - panel) * row_bytes, out, k);
}

namespace detail {

const uint8_t* unpacked_copy(GgmlType t, const uint8_t* rows, size_t row_bytes, int64_t n,
                             int64_t k) {
  thread_local std::vector<uint8_t, AlignedAllocator<uint8_t>> scratch;
  scratch.resize(row_bytes * kPanelRows);
  std::memcpy(scratch.data(), rows, static_cast<size_t>(n) * row_bytes);
  unpack_rows(t, scratch.data(), row_bytes, n, k);
  return scratch.data();
}

}  // namespace detail

}  // namespace epyctune::engine::kernels
