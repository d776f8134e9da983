// LlamaModel's state and the parallel helpers its blocks share. Internal to
// the model library: llama_model.cpp (load, forward), llama_attention.cpp and
// llama_ffn.cpp (the blocks).
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/model/llama_weights.hpp"
#include "engine/model/moe_ffn.hpp"
#include "engine/model/rope.hpp"
#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine {

struct LlamaModel::Impl {
  LlamaWeights w;
  // Per activation row of the pass: the cache it reads and writes and its
  // position; and the runs of rows that belong to one sequence.
  struct RowAt {
    KvCache* kv;
    int pos;
  };
  struct Segment {
    int t0, t1;
  };
  std::vector<RowAt> at;
  std::vector<Segment> segs;
  std::unique_ptr<RopeTable> rope;
  runtime::WeightMemory weight_copy;  // empty when weights are used from the mapping
  // Activations, [batch][...] row-major, sized for max_batch.
  int cap = 0;
  std::vector<float> x, xn, q, k, v, att, gate, up, ffn_out;
  // Prepared activations, one per weight type in use (Q/K/V may differ in Q4_K_M).
  kernels::Acts acts_a, acts_b, acts_c;
  struct ThreadScratch {
    std::vector<float> keys, vals, scores;
    // attend_shared's queries, outputs and prefix lengths for one work item.
    std::vector<const float*> q_rows;
    std::vector<float*> out_rows;
    std::vector<int64_t> n_rows;
    // attend_pages' page lists for one work item (an F16 cache).
    std::vector<const uint16_t*> k_pages, v_pages;
  };
  std::vector<ThreadScratch> scratch;
  // The mixture-of-experts layers' block (one scratch for all layers) and
  // shape, with any --experts-per-token override applied.
  MoeFfn moe;
  MoeShape moe_shape;
  // deepseek2's latent attention and shared experts (mla_attention.cpp).
  std::vector<float> mla_qa, mla_kva, mla_lat, mla_kn, mla_v, mla_kvx, sh_gate, sh_up;

  void reserve(int b, const LlamaConfig& c) {
    if (b <= cap) return;
    cap = b;
    x.resize(size_t(b) * c.dim);
    xn.resize(size_t(b) * c.dim);
    q.resize(size_t(b) * c.q_dim());
    k.resize(size_t(b) * c.kv_dim());
    v.resize(size_t(b) * c.kv_dim());
    att.resize(size_t(b) * c.q_dim());
    gate.resize(size_t(b) * c.ffn_dim);
    up.resize(size_t(b) * c.ffn_dim);
    ffn_out.resize(size_t(b) * c.dim);
  }
};

namespace detail {

// One weight matrix applied to prepared activations, writing y[t * ldy + r].
struct MatJob {
  const Mat* m;
  const kernels::Acts* acts;
  float* y;
  int64_t ldy;
};

// Rows of several matrices in one parallel region (Q/K/V, gate/up), in
// chunks; each output element is computed by exactly one chunk, so the split
// never changes a result.
void run_matmuls(runtime::ThreadPool& pool, std::initializer_list<MatJob> jobs);

// kernels::prepare_acts with the token rows spread over the pool: each row is
// quantized on its own, so the bytes do not depend on the split.
void prepare_acts(runtime::ThreadPool& pool, GgmlType type, const float* x, int n_tokens, int64_t k,
                  kernels::Acts& out);

}  // namespace detail
}  // namespace epyctune::engine
