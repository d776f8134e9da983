// The rewrites of convert_matmul.cpp, written once over an expander X that
// turns a block's packed quants into bytes (scalar, or AVX2 in
// convert_avx2.cpp): integer work only, so every expander writes the same
// bytes.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/kernels/blocks.hpp"

namespace epyctune::engine::kernels::detail {
// Internal linkage: compiled into TUs with different ISA flags.
namespace {

// Where a converted block goes: row L of a ggml-layout scratch matrix. (Not
// packed16 panels: scattering each row's dwords into a panel cost more than
// the gather it saves the kernel, about half the rate for one token.)
struct Sink {
  uint8_t* base;
  size_t row_bytes;
  void q8(int64_t L, int64_t b, uint16_t d, const int8_t* qs) const {
    auto* blk = reinterpret_cast<BlockQ8_0*>(base + static_cast<size_t>(L) * row_bytes) + b;
    blk->d = d;
    std::memcpy(blk->qs, qs, 32);
  }
  void q4k(int64_t L, int64_t b, const BlockQ4_K& blk) const {
    reinterpret_cast<BlockQ4_K*>(base + static_cast<size_t>(L) * row_bytes)[b] = blk;
  }
};

template <class X>
void q5_0_to_q8_0(const BlockQ5_0* src, const Sink& out, int64_t L, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    int8_t qs[32];
    X::q5(src[b].qs, src[b].qh, 16, qs);
    out.q8(L, b, src[b].d, qs);
  }
}

template <class X>
void q5_1_to_q8_0(const BlockQ5_1* src, const Sink& dd, const Sink& mm, int64_t L, int64_t nb) {
  int8_t ones[32];
  std::memset(ones, 1, 32);
  for (int64_t b = 0; b < nb; ++b) {
    int8_t qs[32];
    X::q5(src[b].qs, src[b].qh, 0, qs);
    dd.q8(L, b, src[b].d, qs);
    mm.q8(L, b, src[b].m, ones);
  }
}

// False when a block's scale has no exact fp16 (the row then takes the
// f32 path).
template <class X>
bool mxfp4_to_q8_0(const BlockMxfp4* src, const Sink& out, int64_t L, int64_t nb) {
  bool exact = true;
  for (int64_t b = 0; b < nb; ++b) {
    int8_t qs[32];
    X::mxfp4(src[b].qs, qs);
    const int e = src[b].e;
    uint16_t d = 0;
    if (e >= 104 && e <= 143) {
      d = f32_to_fp16(e8m0_half_to_f32(src[b].e));
    } else {
      bool zero = true;
      for (int j = 0; j < 32; ++j) zero = zero && qs[j] == 0;
      exact = exact && zero;
    }
    out.q8(L, b, d, qs);
  }
  return exact;
}

// One Q5_K super-block as the A and B Q4_K blocks (convert_matmul.cpp).
template <class X>
void q5_k_to_q4_k(const BlockQ5_K& s, BlockQ4_K& a, BlockQ4_K& b) {
  a.d = s.d;
  a.dmin = s.dmin;
  std::memcpy(a.scales, s.scales, 12);
  std::memcpy(a.qs, s.qs, 128);
  const uint16_t d2 = f32_to_fp16(2.0f * fp16_to_f32(s.d));
  if ((d2 & 0x7c00u) == 0x7c00u)
    throw std::runtime_error(
        "Q5_K super-block scale d=" + std::to_string(fp16_to_f32(s.d)) +
        " is too large for this engine's kernels (2d overflows fp16); requantize the file");
  b.d = d2;
  b.dmin = 0;
  for (int i = 0; i < 4; ++i) {
    b.scales[i] = s.scales[i];                // scales 0-3, and the high bits of scales 4-7
    b.scales[i + 4] = 0;                      // mins 0-3 and the high bits of mins 4-7
    b.scales[i + 8] = s.scales[i + 8] & 0xF;  // low bits of scales 4-7
  }
  X::q5k_high(s.qh, b.qs);
}

template <class X>
void q5_k_rows(const BlockQ5_K* src, const Sink& sa, const Sink& sb, int64_t L, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ4_K a, bb;
    q5_k_to_q4_k<X>(src[b], a, bb);
    sa.q4k(L, b, a);
    sb.q4k(L, b, bb);
  }
}

// Rows [r, r + n) of w rewritten into the sinks; exact[i]: row i's chain is
// the rewritten kernel's.
template <class X>
void convert_rows(GgmlType wtype, const uint8_t* w, size_t row_bytes, int64_t r, int64_t n,
                  int64_t nb, const Sink& s0, const Sink& s1, bool* exact) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = w + static_cast<size_t>(r + i) * row_bytes;
    exact[i] = true;
    switch (wtype) {
      case GgmlType::Q5_0:
        q5_0_to_q8_0<X>(reinterpret_cast<const BlockQ5_0*>(src), s0, i, nb);
        break;
      case GgmlType::Q5_1:
        q5_1_to_q8_0<X>(reinterpret_cast<const BlockQ5_1*>(src), s0, s1, i, nb);
        break;
      case GgmlType::MXFP4:
        exact[i] = mxfp4_to_q8_0<X>(reinterpret_cast<const BlockMxfp4*>(src), s0, i, nb);
        break;
      default:
        q5_k_rows<X>(reinterpret_cast<const BlockQ5_K*>(src), s0, s1, i, nb);
        break;
    }
  }
}

// The reference expander.
struct ExpandScalar {
  // Q5_0 / Q5_1 quants minus bias, in element order.
  static void q5(const uint8_t* qs, const uint8_t* qh, int bias, int8_t* out) {
    for (int j = 0; j < 32; ++j) out[j] = static_cast<int8_t>(q5_quant(qs, qh, j) - bias);
  }
  static void mxfp4(const uint8_t* qs, int8_t* out) {
    for (int j = 0; j < 16; ++j) {
      out[j] = kMxfp4Values[qs[j] & 0xF];
      out[j + 16] = kMxfp4Values[qs[j] >> 4];
    }
  }
  // Q5_K's fifth bits as Q4_K nibbles worth 8: chunk c, byte l = 8 * bit 2c
  // of qh[l] | (8 * bit 2c + 1) << 4.
  static void q5k_high(const uint8_t* qh, uint8_t* out) {
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int h0 = (qh[l] >> (2 * c)) & 1, h1 = (qh[l] >> (2 * c + 1)) & 1;
        out[32 * c + l] = static_cast<uint8_t>((8 * h0) | ((8 * h1) << 4));
      }
    }
  }
};

}  // namespace

// convert_rows<ExpandAvx2> (convert_avx2.cpp).
void convert_rows_avx2(GgmlType wtype, const uint8_t* w, size_t row_bytes, int64_t r, int64_t n,
                       int64_t nb, uint8_t* out0, uint8_t* out1, size_t out_row, bool* exact);

}  // namespace epyctune::engine::kernels::detail
