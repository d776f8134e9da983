// Compute kernels: a scalar reference for every op (the test oracle) and
// AVX2 / AVX-512 (VNNI) versions picked at run time.
//
// Matrix-vector products follow the integer-dot-product design of the lean
// engines: activations are quantized once per matmul (Q8_0 blocks for Q4_0/Q8_0
// weights, Q8_K blocks for Q4_K/Q6_K, f32 for float weights) and then dotted
// against each weight row. A batch of n_tokens activation rows is processed per
// weight block loaded, so verifying K tokens reads the weights once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine::kernels {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, avx512vnni = 3 };
const char* isa_name(Isa isa);
Isa best_isa();         // what this CPU supports (cpuid + xgetbv)
Isa active_isa();       // what dispatch uses now (default best_isa())
void set_isa(Isa isa);  // tests and --isa; throws if the CPU lacks it

// How a one-token matmul prefetches the weights it streams once per pass:
// non-temporal (nta) or into every cache level (t0). Zen cores stream
// fastest with nta; an Intel core (Sapphire Rapids class) read a one-token
// packed16 Q4_0 matmul at 12.5 GB/s with nta and 29.9 with t0, 34.5 probed.
// The default follows the CPU's vendor; kernel-bench can set either. The
// hint changes timing only, never a result's bits.
enum class StreamHint { nta, t0 };
const char* stream_hint_name(StreamHint h);
StreamHint default_stream_hint();  // nta on AMD, t0 elsewhere
StreamHint stream_hint();
void set_stream_hint(StreamHint h);

// Reference conversions (also used by mkmodel). n is a multiple of the block size.
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);
// How Q4_K picks each sub-block's scale and min: ggml's search (the
// reference; what the common quantizers write) or plain min-max (valid
// blocks, a little more error, for generating large test models quickly).
enum class QuantSearch { ggml, minmax };
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n, QuantSearch search);
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// 64-byte aligned byte storage, so SIMD kernels can use aligned loads.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

// Activations prepared for one matmul: n_tokens rows of k elements, in an
// internal layout chosen per weight type (see blocks.hpp). Reusing one Acts
// across matmuls avoids reallocation (storage only grows).
struct Acts {
  GgmlType weight_type = GgmlType::F32;  // what they were prepared for
  GgmlType vec_type = GgmlType::F32;     // Q8_0, Q8_K or F32
  int n_tokens = 0;
  int64_t k = 0;
  size_t row_bytes = 0;  // stride between token rows in data (a multiple of 64)
  std::vector<uint8_t, AlignedAllocator<uint8_t>> data;  // 64-byte aligned
  const uint8_t* row(int t) const { return data.data() + static_cast<size_t>(t) * row_bytes; }
};
// Quantizes x (n_tokens rows of k floats, contiguous) for weight_type. k must be
// a multiple of the weight type's block size. Output bytes are identical for
// every ISA.
void prepare_acts(GgmlType weight_type, const float* x, int n_tokens, int64_t k, Acts& out);
// The same in two steps, so that threads can fill disjoint token rows: the
// shape (validated as above; the rows are left unset), then rows [t0, t1)
// from x, which points at row 0.
void prepare_acts_shape(GgmlType weight_type, int n_tokens, int64_t k, Acts& out);
void prepare_acts_rows(const float* x, int t0, int t1, Acts& out);

// y[t * ldy + r] = dot(W[r, :], x_t) for rows r in [r0, r1) and all tokens.
// W rows are w_row_bytes apart. Thread-safe for disjoint row ranges.
void matmul_rows(GgmlType wtype, const void* w, size_t w_row_bytes, const Acts& acts, float* y,
                 int64_t ldy, int64_t r0, int64_t r1);

// Weight rows as ggml stores them, or repacked once at load into the layout
// the SIMD kernels consume (blocks.hpp: packed16), which spares every matmul a
// gather and a transpose per 16 blocks. Results are bit-identical either way.
// Packed matrices interleave panels of 16 rows: pack a matrix (or pieces
// of it that start at a multiple of 16 rows), and read row ranges [r0, r1)
// with r0 a multiple of 16 and r1 one too or the matrix's last row
// (matmul_rows throws for a misaligned r0).
enum class WeightLayout { ggml, packed16 };
bool has_packed_layout(GgmlType t);  // Q4_0, Q8_0, Q4_K
// Whether the active ISA has a native kernel for packed rows of this type (the
// others unpack each row first: correct, but slower than the ggml layout).
bool packed_layout_pays(GgmlType t);
// In-place permutations of n_rows rows of k elements; throw for other types.
void pack_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k);
void unpack_rows(GgmlType t, void* rows, size_t row_bytes, int64_t n_rows, int64_t k);
// Row r of a packed matrix of n_rows rows as floats (dequantize_row of the
// row ggml would hold): a tied embedding table is packed for the output head
// and still looked up by row.
void dequantize_packed_row(GgmlType t, const void* rows, size_t row_bytes, int64_t n_rows,
                           int64_t k, int64_t r, float* out);
void matmul_rows(GgmlType wtype, WeightLayout layout, const void* w, size_t w_row_bytes,
                 const Acts& acts, float* y, int64_t ldy, int64_t r0, int64_t r1);

// Elementwise / reduction ops on f32, deterministic (no fast-math, no fp
// contraction); the ones with per-ISA copies give the same bits on every ISA.
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);
void softmax(float* x, int64_t n);
void silu_mul(float* gate_inout, const float* up, int64_t n);  // gate = silu(gate) * up
void add(float* y, const float* x, int64_t n);                 // y += x
float dot_f32(const float* a, const float* b, int64_t n);
void axpy(float* y, float a, const float* x, int64_t n);  // y += a * x
// e^x as the ops compute it (within 2 ulp; +0 below ln(FLT_MIN)).
float exp_f32(float x);
// One head's attention over n positions (keys, vals: n rows of hd):
// scores[j] = dot(q, k_j) * scale, softmax, out = sum_j scores[j] * v_j;
// scores holds n floats of scratch. Equal to doing it with dot_f32, softmax
// and axpy.
void attend(const float* q, const float* keys, const float* vals, int64_t n, int64_t hd,
            float scale, float* scores, float* out);
// attend for nq query heads that read the same keys and values (the heads
// of a GQA group, the rows of one sequence in a pass): query i attends to
// the first ns[i] positions, q[i] -> out[i], each out[i] bit-identical to
// attend's. The keys and values are read once per kAttendTile queries
// (head dims 64 and 128), so a pass of many rows reads them a fraction as
// often. scores holds kAttendTile x max(ns) floats of scratch.
constexpr int kAttendTile = 4;
void attend_shared(const float* const* q, const int64_t* ns, int nq, const float* keys,
                   const float* vals, int64_t hd, float scale, float* scores, float* const* out);
// attend_shared on f16 keys and values kept in pages of kKvPagePositions
// rows (the KV cache's blocks): page p holds positions [16p, 16p + 16) of
// one head, hd halves each, and kpages / vpages list a page per 16 of the
// longest prefix. Each half is converted as it is read, so each out[i]
// has the bits attend_shared gives on the keys and values converted to
// f32 first. Head dims 64 and 128 only (attend_pages_supported).
constexpr int kKvPagePositions = 16;
bool attend_pages_supported(int64_t hd);
void attend_pages(const float* const* q, const int64_t* ns, int nq, const uint16_t* const* kpages,
                  const uint16_t* const* vpages, int64_t hd, float scale, float* scores,
                  float* const* out);
// NeoX- or normal-style rotary embedding on one head vector of head_dim,
// position pos; cos/sin computed from freq_base and freq_scale.
void rope(float* head, int head_dim, int n_rot, int pos, float freq_base, float freq_scale,
          bool neox);

}  // namespace epyctune::engine::kernels
