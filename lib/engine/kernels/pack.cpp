// Repacking Q4_0 / Q8_0 / Q4_K weight rows into the packed16 layout
// (blocks.hpp) and back. Pure permutations (of bytes; for Q4_K of nibbles and
// 6-bit scale fields): a packed row holds exactly the information of the ggml
// row, so the matmul results cannot change, only the load pattern.
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
using detail::kPackBlocks;
using detail::kPackD;

// Bytes per lane (one 32-element block or Q4_K sub-block): a group of 16
// lanes is 16 times that, packed or not.
size_t lane_bytes(GgmlType t) {
  if (t == GgmlType::Q4_0) return sizeof(BlockQ4_0);
  if (t == GgmlType::Q8_0) return sizeof(BlockQ8_0);
  if (t == GgmlType::Q4_K) return sizeof(BlockQ4_K) / 8;
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

// Q4_K's 6-bit scale and min of sub-block j into ggml's 12 packed bytes
// (the inverse of detail::q4k_scale_min; every bit is written once).
void q4k_set_scale_min(int j, uint8_t* q, uint8_t sc, uint8_t m) {
  if (j < 4) {
    q[j] = static_cast<uint8_t>((q[j] & 0xC0) | sc);
    q[j + 4] = static_cast<uint8_t>((q[j + 4] & 0xC0) | m);
  } else {
    q[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    q[j - 4] = static_cast<uint8_t>((q[j - 4] & 0x3F) | ((sc >> 4) << 6));
    q[j] = static_cast<uint8_t>((q[j] & 0x3F) | ((m >> 4) << 6));
  }
}

// One Q4_K pair (n = 16 lanes) or lone super-block (n = 8): ggml <-> packed.
// Lane L is sub-block L % 8 of super-block L / 8; see blocks.hpp for the
// packed byte layout.
void permute_q4k(int n, const uint8_t* src, uint8_t* dst, bool to_packed) {
  // Every bit of dst is written once below (the 12 ggml scale bytes field by
  // field), so dst needs no clearing.
  const size_t nn = static_cast<size_t>(n);
  uint32_t sc_hi = 0, m_hi = 0;
  if (!to_packed) {
    std::memcpy(&sc_hi, src + nn, nn / 4);
    std::memcpy(&m_hi, src + nn + nn / 4, nn / 4);
  }
  for (size_t h = 0; h < nn / 8; ++h) {
    const size_t dd = 3 * nn / 2 + 4 * h;  // packed d, dmin
    auto* blk = reinterpret_cast<BlockQ4_K*>(to_packed ? nullptr : dst + h * sizeof(BlockQ4_K));
    const auto* sblk =
        reinterpret_cast<const BlockQ4_K*>(to_packed ? src + h * sizeof(BlockQ4_K) : nullptr);
    if (to_packed) {
      std::memcpy(dst + dd, &sblk->d, 2);
      std::memcpy(dst + dd + 2, &sblk->dmin, 2);
    } else {
      std::memcpy(&blk->d, src + dd, 2);
      std::memcpy(&blk->dmin, src + dd + 2, 2);
    }
    for (int j = 0; j < 8; ++j) {
      const size_t L = 8 * h + static_cast<size_t>(j);
      if (to_packed) {
        uint8_t sc, m;
        detail::q4k_scale_min(j, sblk->scales, sc, m);
        dst[L] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
        sc_hi |= static_cast<uint32_t>(sc >> 4) << (2 * L);
        m_hi |= static_cast<uint32_t>(m >> 4) << (2 * L);
      } else {
        const auto sc = static_cast<uint8_t>((src[L] & 0xF) | (((sc_hi >> (2 * L)) & 3) << 4));
        const auto m = static_cast<uint8_t>((src[L] >> 4) | (((m_hi >> (2 * L)) & 3) << 4));
        q4k_set_scale_min(j, blk->scales, sc, m);
      }
    }
    // Quants, a 32-bit word at a time. Sub-blocks j and j + 1 (j even) share
    // ggml's bytes 32 * (j / 2) + e: j in the low nibbles, j + 1 in the high.
    // Packed, lane L's word in chunk i holds elements 4i..4i+3 in its low
    // nibbles and 16+4i..16+4i+3 in its high nibbles.
    const size_t qs = h * sizeof(BlockQ4_K) + offsetof(BlockQ4_K, qs);
    for (size_t jp = 0; jp < 4; ++jp) {
      const size_t le = 8 * h + 2 * jp;  // lane of the even sub-block; le + 1: odd
      for (size_t i = 0; i < 4; ++i) {
        const size_t wlo = qs + 32 * jp + 4 * i, whi = wlo + 16;      // ggml words
        const size_t pe = 2 * nn + 4 * nn * i + 4 * le, po = pe + 4;  // packed words
        uint32_t lo, hi, e, o;
        if (to_packed) {
          std::memcpy(&lo, src + wlo, 4);
          std::memcpy(&hi, src + whi, 4);
          e = (lo & 0x0F0F0F0Fu) | ((hi & 0x0F0F0F0Fu) << 4);
          o = ((lo >> 4) & 0x0F0F0F0Fu) | (hi & 0xF0F0F0F0u);
          std::memcpy(dst + pe, &e, 4);
          std::memcpy(dst + po, &o, 4);
        } else {
          std::memcpy(&e, src + pe, 4);
          std::memcpy(&o, src + po, 4);
          lo = (e & 0x0F0F0F0Fu) | ((o & 0x0F0F0F0Fu) << 4);
          hi = ((e >> 4) & 0x0F0F0F0Fu) | (o & 0xF0F0F0F0u);
          std::memcpy(dst + wlo, &lo, 4);
          std::memcpy(dst + whi, &hi, 4);
        }
      }
    }
  }
  if (to_packed) {
    std::memcpy(dst + nn, &sc_hi, nn / 4);
    std::memcpy(dst + nn + nn / 4, &m_hi, nn / 4);
  }
}

void permute_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k,
                  bool to_packed) {
  const size_t bb = lane_bytes(t);
  const int64_t nb = k / 32;
  uint8_t tmp[kPackBlocks * sizeof(BlockQ8_0)];
  auto* base = static_cast<uint8_t*>(rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = base + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < nb; b += kPackBlocks) {
      const int n = static_cast<int>(std::min<int64_t>(kPackBlocks, nb - b));
      uint8_t* grp = row + static_cast<size_t>(b) * bb;
      std::memcpy(tmp, grp, bb * static_cast<size_t>(n));
      if (t == GgmlType::Q4_K)
        permute_q4k(n, tmp, grp, to_packed);
      else
        permute_group(bb, n, tmp, grp, to_packed);
    }
  }
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

}  // namespace epyctune::engine::kernels
