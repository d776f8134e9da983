// Per-ISA matmul entry points. Each ISA file defines its own table; dispatch
// picks one at run time. Every entry must produce bytes identical to the
// scalar reference (ref_matmul.cpp), which defines the canonical order:
//   - integer dot products of a block (or 4-element groups of it) are exact;
//   - Q4_0 / Q8_0 / Q4_K: one fma chain per row over its blocks, in order;
//   - the other types: float partials accumulate with fma into 16 stripes,
//     which reduce with reduce16() from blocks.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/kernels.hpp"

namespace epyctune::engine::kernels::detail {

using MatmulFn = void (*)(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y,
                          int64_t ldy, int64_t r0, int64_t r1);

struct MatmulTable {
  MatmulFn f32 = nullptr, f16 = nullptr, bf16 = nullptr;
  MatmulFn q4_0 = nullptr, q8_0 = nullptr, q4_k = nullptr, q6_k = nullptr;
  // WeightLayout::packed16 rows; null: dispatch unpacks rows for the ggml kernel.
  MatmulFn q4_0_p16 = nullptr, q8_0_p16 = nullptr, q4_k_p16 = nullptr;
};

// Defined in ref_matmul.cpp (scalar), *_avx2.cpp and *_avx512*.cpp. An ISA
// table may leave an entry null; dispatch then uses the next lower ISA.
void fill_scalar_table(MatmulTable& t);
void fill_avx2_table_qx_0(MatmulTable& t);
void fill_avx2_table_q6_k(MatmulTable& t);
void fill_avx2_table_q4_k(MatmulTable& t);
void fill_avx2_table_float(MatmulTable& t);
void fill_avx512_table_qx_0(MatmulTable& t);
void fill_avx512_table_q4_k(MatmulTable& t);
void fill_avx512_table_float(MatmulTable& t);
void fill_avx512vnni_table_qx_0(MatmulTable& t);
void fill_avx512vnni_table_q4_k(MatmulTable& t);
void fill_avx512_table_packed(MatmulTable& t);
void fill_avx512vnni_table_packed(MatmulTable& t);

// AVX2 activation quantizers (quantize_acts_avx2.cpp): one scale for n
// elements (a multiple of 32 / 16), bytes identical to the scalar rule.
float quantize_group_i8_avx2(const float* x, int n, int8_t* q);
float quantize_group_i16_avx2(const float* x, int n, int16_t* q);

// Attention's f32 dot product and y += a * x: the scalar reference
// (ops.cpp; 16 stripes, reduce16) and per-ISA copies with the same roundings
// (a multiply, then an add: no fma), which ops.cpp picks by active_isa().
float dot_f32_ref(const float* a, const float* b, int64_t n);
void axpy_ref(float* y, float a, const float* x, int64_t n);
float dot_f32_avx2(const float* a, const float* b, int64_t n);
void axpy_avx2(float* y, float a, const float* x, int64_t n);
float dot_f32_avx512(const float* a, const float* b, int64_t n);
void axpy_avx512(float* y, float a, const float* x, int64_t n);
// The exp-based ops and one head's attention (vec_math.hpp written once over
// the lanes, so every ISA's copy gives the reference's bits).
#define EPYCTUNE_VEC_MATH_OPS(sfx)                                                               \
  void softmax_##sfx(float* x, int64_t n);                                                       \
  void silu_mul_##sfx(float* gate_inout, const float* up, int64_t n);                            \
  void attend_##sfx(const float* q, const float* keys, const float* vals, int64_t n, int64_t hd, \
                    float scale, float* scores, float* out);                                     \
  void attend_shared_##sfx(const float* const* q, const int64_t* ns, int nq, const float* keys,  \
                           const float* vals, int64_t hd, float scale, float* scores,            \
                           float* const* out);                                                   \
  void attend_pages_##sfx(const float* const* q, const int64_t* ns, int nq,                      \
                          const uint16_t* const* kpages, const uint16_t* const* vpages,          \
                          int64_t hd, float scale, float* scores, float* const* out);
EPYCTUNE_VEC_MATH_OPS(ref)
EPYCTUNE_VEC_MATH_OPS(avx2)
EPYCTUNE_VEC_MATH_OPS(avx512)
#undef EPYCTUNE_VEC_MATH_OPS

// n <= 16 packed rows from `rows` (a panel, or the rows of one that remain)
// copied into this thread's scratch buffer and unpacked there to ggml's
// layout (pack.cpp). The pointer stays valid until this thread's next call.
const uint8_t* unpacked_copy(GgmlType t, const uint8_t* rows, size_t row_bytes, int64_t n,
                             int64_t k);

// prepare_acts bodies (prepare_acts.cpp): token rows [t0, t1) of x into out,
// exact elementwise float ops only, so the bytes do not depend on the ISA.
void prepare_acts_q8(GgmlType wtype, const float* x, int t0, int t1, int64_t k, Acts& out);
void prepare_acts_k(const float* x, int t0, int t1, int64_t k, Acts& out);
void prepare_acts_q4k(const float* x, int t0, int t1, int64_t k, Acts& out);

}  // namespace epyctune::engine::kernels::detail
