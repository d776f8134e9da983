// Block layouts exactly as ggml stores them (ggml-common.h), the fp16/bf16
// conversions, and the activation layouts this library prepares for each
// weight type. Internal to the kernels library and its tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine::kernels::detail {
// Internal linkage: this header is compiled into TUs with different ISA flags
// (-mavx512f ...), and a baseline TU must never link to such a TU's copy of
// an inline helper.
namespace {

constexpr int kQK4_0 = 32;
constexpr int kQK8_0 = 32;
constexpr int kQK_K = 256;

struct BlockQ4_0 {
  uint16_t d;      // fp16 scale
  uint8_t qs[16];  // element j in low nibble of qs[j], element j+16 in the high nibble
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_K {
  uint16_t d;          // fp16 super-block scale for the 6-bit sub-block scales
  uint16_t dmin;       // fp16 super-block scale for the 6-bit sub-block mins
  uint8_t scales[12];  // 8 scales + 8 mins, 6 bits each, packed
  uint8_t qs[128];     // 64-element chunks: low nibbles = sub-block 2j, high = 2j+1
};
struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // one per 16 elements
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sums of 16-element groups
};
// The 5-bit and MXFP4 types (ggml-common.h). Q5_0 / Q5_1: element j's fifth
// bit is bit j of qh (little-endian), its low 4 bits as in Q4_0. Q5_K:
// Q4_K's scales and nibbles, plus bit j of qh[l] is the fifth bit of element
// l of sub-block j. MXFP4: e is an E8M0 exponent, the nibbles index
// kMxfp4Values (E2M1 values doubled, hence ggml's half-scale).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockMxfp4) == 17);
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// ggml's E8M0_TO_FP32_HALF: 2^(e - 128), exact for every e (subnormal below 2).
inline float e8m0_half_to_f32(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// Q5_0 / Q5_1 quant j (0..31) of a block, 0..31.
inline int q5_quant(const uint8_t* qs, const uint8_t* qh, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const int lo = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
  return lo | static_cast<int>(((h >> j) & 1u) << 4);
}

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Geometry of the types this library handles, without depending on the gguf
// library's traits() (which lives in another library).
struct Geometry {
  int64_t block_elems;
  size_t block_bytes;
};
inline bool geometry(GgmlType t, Geometry& g) {
  switch (t) {
    case GgmlType::F32:
      g = {1, 4};
      return true;
    case GgmlType::F16:
      g = {1, 2};
      return true;
    case GgmlType::BF16:
      g = {1, 2};
      return true;
    case GgmlType::Q4_0:
      g = {32, sizeof(BlockQ4_0)};
      return true;
    case GgmlType::Q8_0:
      g = {32, sizeof(BlockQ8_0)};
      return true;
    case GgmlType::Q4_K:
      g = {256, sizeof(BlockQ4_K)};
      return true;
    case GgmlType::Q6_K:
      g = {256, sizeof(BlockQ6_K)};
      return true;
    case GgmlType::Q8_K:
      g = {256, sizeof(BlockQ8_K)};
      return true;
    case GgmlType::Q5_0:
      g = {32, sizeof(BlockQ5_0)};
      return true;
    case GgmlType::Q5_1:
      g = {32, sizeof(BlockQ5_1)};
      return true;
    case GgmlType::Q5_K:
      g = {256, sizeof(BlockQ5_K)};
      return true;
    case GgmlType::MXFP4:
      g = {32, sizeof(BlockMxfp4)};
      return true;
  }
  return false;
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Exact IEEE half -> single (what F16C's vcvtph2ps computes for non-NaN input).
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    // Subnormal (or zero): m * 2^-24 is exact in single precision.
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

// Single -> half, round to nearest even (what ggml and F16C's vcvtps2ph with
// rounding mode 0 produce).
inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (ax < 0x38800000u) {                                               // half subnormal range
    if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);          // <= 2^-25 ties to 0
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t s = 126u - e;  // value in units of 2^-24 is m >> s
    uint32_t r = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u);
    const uint32_t half = 1u << (s - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t r = ax - 0x38000000u;  // rebias the exponent from 127 to 15
  uint32_t h = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_f32(uint16_t h) {
  return bits_f32(static_cast<uint32_t>(h) << 16);
}
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// Q4_K's packed 6-bit scale and min of sub-block j (0..7).
inline void q4k_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// ---------------------------------------------------------------------------
// The canonical float reduction. Every ISA reduces its 16 float stripes
// (Q6_K, F32/F16/BF16) with exactly this tree, so results are bit-identical
// across ISAs.
inline float reduce16(const float* a) {
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) q[i] = h[i] + h[i + 4];
  const float r0 = q[0] + q[2];
  const float r1 = q[1] + q[3];
  return r0 + r1;
}

// ---------------------------------------------------------------------------
// Activation layouts. One token row is a sequence of fixed-size records (one
// per block pair or super-block), so a kernel reads one stream per token. The
// row stride is an odd multiple of 64 bytes so the rows of a token batch do not
// all map to the same L1 sets.
constexpr size_t align64(size_t n) {
  return (n + 63) & ~size_t{63};
}
inline size_t acts_row_stride(size_t bytes) {
  size_t s = align64(bytes);
  if ((s / 64) % 2 == 0) s += 64;
  return s;
}

// For Q4_0 / Q8_0 weights, blocks go in groups of 16 (the last group padded
// with zero blocks). Lane L (0..15) of group g is block 16g + L, so one SIMD
// int32 lane accumulates a whole block's dot product. Record g (640 bytes):
//   [0, 512)   8 rows of 64 bytes: row i, lane L (bytes 4L..4L+3) = elements
//              4i..4i+3 of block 16g + L;
//   [512, 576) 16 floats: the scale d of each block;
//   [576, 640) 16 int32: the correction that lets u8 x s8 dot products
//              (vpdpbusd) take unsigned weights: Q4_0: -8 * sum of the block's
//              quants; Q8_0 (weights xor 0x80): -128 * sum.
constexpr size_t kQ8GroupBytes = 640;
constexpr size_t kQ8GroupD = 512;
constexpr size_t kQ8GroupCorr = 576;
inline int64_t q8_groups(int64_t k) {
  return (k / 32 + 15) / 16;
}
inline size_t acts_q8_row_bytes(int64_t k) {
  return acts_row_stride(static_cast<size_t>(q8_groups(k)) * kQ8GroupBytes);
}
// Byte offset in its group record of element e (0..31) of lane L's block.
constexpr int q8_group_pos(int L, int e) {
  return 64 * (e / 4) + 4 * L + (e % 4);
}

// Packed weights (WeightLayout::packed16) for Q4_0 / Q8_0 (Q4_K below): every full panel
// of 16 rows (rows 16p .. 16p + 15) is stored block-major, as the SIMD
// kernels consume it: lane L of a vector is row L, so a block of 16 rows is a
// handful of plain loads and the activations can be broadcast. The panel
// keeps its 16 rows' bytes (16 x 18 or 16 x 34 per block); block b sits at
// 16 x bytes-per-block x b:
//   [0, 32)    16 fp16: row L's scale d at 2L;
//   [32, ...)  Q4_0: 4, Q8_0: 8 chunks of 64 bytes: chunk i, lane L (bytes
//              4L..4L+3) = quant bytes 4i..4i+3 of row L's block (for Q4_0
//              the nibble pairs, exactly as in the block).
// The n_rows % 16 rows after the last full panel keep ggml's layout. So a
// packed matrix is read in row ranges that start at a multiple of 16 and end
// at one or at the last row.
constexpr int64_t kPanelRows = 16;
constexpr size_t kPackD = 32;

// Q4_K packs the same 16-row panels, a super-block at a time (16 x 144
// bytes at 2304 x b): vector q (64 bytes) lane L = dword q of row L's block,
// for q = 0..35: [0, 64) d | dmin << 16; [64, 256) the 12 packed 6-bit scale
// and min bytes; [256, 2304) the quants, chunk c (32 bytes: sub-blocks 2c in
// the low nibbles, 2c + 1 in the high) as vectors 8c .. 8c + 7.
constexpr size_t kQ4KPanelScales = 64;
constexpr size_t kQ4KPanelQs = 256;

// For Q4_K weights, super-blocks go in pairs (2m, 2m+1; an odd count is padded
// with a zero super-block) and lane L (0..15) is sub-block L % 8 of super-block
// 2m + L / 8, so one SIMD int32 lane accumulates a whole 32-element sub-block
// and takes its 6-bit scale with one multiply. Record m (640 bytes):
//   [0, 512)   8 rows of 64 bytes: row i, lane L (bytes 4L..4L+3) = elements
//              4i..4i+3 of lane L's sub-block;
//   [512, 576) 16 floats: the scale d of lane L's super-block;
//   [576, 608) 16 int16: the sums of the sub-blocks' quants (for the mins;
//              |sum| <= 32 x 127), super-block h's 8 at 576 + 16h in the order
//              of q4k_isum_slot, so that its dword i is the pair of sums that
//              meets the weights' int16 pairs of mins i (dword i of a row:
//              mins 0|2, 1|3, 4|6, 5|7) in one vpdpwssd / vpmaddwd;
//   [608, 640) zero.
constexpr size_t kQ4KPairBytes = 640;
constexpr size_t kQ4KPairD = 512;
constexpr size_t kQ4KPairIsum = 576;
// Slot (0..7) of sub-block j's sum among its super-block's 8 int16.
constexpr int q4k_isum_slot(int j) {
  return 4 * (j / 4) + 2 * (j % 2) + (j % 4) / 2;
}
inline int64_t q4k_pairs(int64_t k) {
  return (k / 256 + 1) / 2;
}
inline size_t acts_q4k_row_bytes(int64_t k) {
  return acts_row_stride(static_cast<size_t>(q4k_pairs(k)) * kQ4KPairBytes);
}
// Byte offset in its pair record of element e (0..31) of lane L's sub-block.
constexpr int q4k_pair_pos(int L, int e) {
  return 64 * (e / 4) + 4 * L + (e % 4);
}

// For Q6_K weights, record b (576 bytes) per super-block:
//   [0, 512)   int16 quants, natural order;
//   [512, 516) float scale d; the rest is padding to whole cache lines.
constexpr size_t kKBlockBytes = 576;
constexpr size_t kKBlockD = 512;
inline size_t acts_k_row_bytes(int64_t k) {
  return acts_row_stride(static_cast<size_t>(k / 256) * kKBlockBytes);
}

}  // namespace
}  // namespace epyctune::engine::kernels::detail
