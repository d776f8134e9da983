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
using detail::kPackD;

// Q4_0 / Q8_0: every full panel of 16 rows, ggml (src) -> packed (dst) or
// back (blocks.hpp); the rows after the last full panel keep ggml's layout.
void permute_panels(GgmlType t, uint8_t* base, size_t row_bytes, int64_t n_rows, int64_t k,
                    bool to_packed) {
  const size_t bb = t == GgmlType::Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const auto nb = static_cast<size_t>(k / 32);
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
        move(2 * L, 0, 2);
        for (size_t i = 0; i < (bb - 2) / 4; ++i) move(kPackD + 64 * i + 4 * L, 2 + 4 * i, 4);
      }
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
  auto* base = static_cast<uint8_t*>(rows);
  if (t == GgmlType::Q4_0 || t == GgmlType::Q8_0)
    return permute_panels(t, base, row_bytes, n_rows, k, to_packed);
  if (t != GgmlType::Q4_K)
    throw std::invalid_argument("packed16 layout: no packed form for weight type " +
                                std::to_string(static_cast<uint32_t>(t)));
  // Q4_K: pairs of super-blocks (16 lanes of 18 bytes), within each row.
  const int64_t nsb = k / 256;
  uint8_t tmp[2 * sizeof(BlockQ4_K)];
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = base + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < nsb; b += 2) {
      const int n = static_cast<int>(std::min<int64_t>(2, nsb - b)) * 8;
      uint8_t* grp = row + static_cast<size_t>(b) * sizeof(BlockQ4_K);
      std::memcpy(tmp, grp, sizeof(BlockQ4_K) * static_cast<size_t>(n / 8));
      permute_q4k(n, tmp, grp, to_packed);
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
