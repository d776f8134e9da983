// The tensors of a llama model, found by llama.cpp's names and checked against
// the shapes the metadata implies. Internal to the model library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_config.hpp"
#include "engine/runtime/progress.hpp"
#include "engine/runtime/shared_weights.hpp"
#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine {
namespace gguf {
class File;
}
namespace runtime {
class ThreadPool;
}

// A weight matrix of `rows` rows of `cols` elements (ggml ne1 x ne0).
struct Mat {
  std::string name;
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  int64_t rows = 0, cols = 0;
  kernels::WeightLayout layout = kernels::WeightLayout::ggml;
  size_t bytes() const { return row_bytes * static_cast<size_t>(rows); }
};

// A mixture-of-experts FFN's tensors (FfnKind::moe). The expert tensors
// stack n_expert matrices along rows: expert e of ffn_gate_exps is rows
// [e * expert_ffn, (e + 1) * expert_ffn).
struct MoeLayerWeights {
  Mat router;     // ffn_gate_inp: n_expert rows of dim
  Mat gate_exps;  // ffn_gate_exps: n_expert * expert_ffn rows of dim
  Mat up_exps;    // ffn_up_exps: the same shape
  Mat down_exps;  // ffn_down_exps: n_expert * dim rows of expert_ffn
  // deepseek2: the shared experts, one SwiGLU of n_expert_shared *
  // expert_ffn rows (empty Mats when absent), and exp_probs_b, a per-expert
  // bias added to the probabilities for selection only (empty when absent).
  Mat gate_shexp = {}, up_shexp = {}, down_shexp = {};
  std::vector<float> probs_bias = {};
  // gpt-oss's biases (empty when absent): router_b n_expert, gate_b and up_b
  // n_expert * expert_ffn, down_b n_expert * dim, expert-major.
  std::vector<float> router_b = {}, gate_b = {}, up_b = {}, down_b = {};
};

// deepseek2's latent attention tensors (MlaConfig); unused Mats stay empty.
struct MlaLayerWeights {
  Mat wq_a, wq_b;            // q_lora_rank > 0
  Mat wkv_a;                 // attn_kv_a_mqa: kv_lora_rank + n_rot rows of dim
  Mat wkv_b;                 // attn_kv_b: n_heads * (qk_nope + v_head_dim) rows of kv_lora_rank
  Mat wv_b;                  // attn_v_b: n_heads * v_head_dim rows of kv_lora_rank
  Mat wk_b_t;                // attn_k_b transposed: n_heads * qk_nope rows of kv_lora_rank (f32)
  std::vector<float> k_b_t;  // wk_b_t's data, made at load
  std::vector<float> q_a_norm, kv_a_norm;
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // dequantized at load (tiny)
  Mat wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;      // attn_{q,k,v}.bias (qwen2); empty when absent
  std::vector<float> q_norm, k_norm;  // attn_{q,k}_norm, head_dim each (qwen3); empty when absent
  std::vector<float> bo;              // attn_output.bias, dim (gpt-oss); empty when absent
  std::vector<float> sinks;           // attn_sinks, one logit per head (gpt-oss); empty when absent
  FfnKind ffn_kind = FfnKind::dense;
  Mat w_gate, w_up, w_down;  // FfnKind::dense
  MoeLayerWeights moe;       // FfnKind::moe
  MlaLayerWeights mla;       // deepseek2 (wq is attn_q when q_lora_rank = 0)

  // This layer's matrices, in the order they are laid out in a weight copy.
  std::vector<Mat*> matrices();
  std::vector<const Mat*> matrices() const;
};

struct LlamaWeights {
  Mat tok_embd;
  Mat output;  // == tok_embd (same data) when the head is tied
  bool tied_output = false;
  std::vector<float> output_norm;
  // rope_freqs.weight (n_rot / 2 divisors of the rope angles, Llama 3.1+);
  // empty when absent.
  std::vector<float> rope_freqs;
  std::vector<LayerWeights> layers;
  uint64_t norm_bytes = 0;  // bytes of the norm tensors as stored in the file

  // Every distinct matrix, for copying and byte counts.
  std::vector<Mat*> matrices();
};

// Finds and validates every tensor; throws std::runtime_error naming the file,
// the tensor, and expected vs found shape or type.
LlamaWeights bind_weights(const gguf::File& f, const LlamaConfig& cfg);

struct CopyResult {
  runtime::WeightMemory memory;  // private, or the read-only store file mapping
  std::string note;              // NUMA bind failures, hugetlb fallback, store files rebuilt
  uint64_t packed_bytes = 0;     // bytes repacked (CopyOptions::pack)
  runtime::SharedWeightsInfo shared;
};
struct CopyOptions {
  bool hugepages = false;
  // Repack matmul-only Q4_0/Q8_0/Q4_K matrices to packed16 where the active ISA
  // has kernels for it (the embedding table stays: rows are looked up).
  bool pack = false;
  runtime::NumaPolicy policy = runtime::NumaPolicy::none;
  std::vector<int> nodes;
  runtime::ProgressFn progress;  // stage "copy", in bytes
  // Non-empty: map the copy read-only from this shared store directory,
  // building the store file first when it is absent or unusable.
  std::filesystem::path shared_dir;
};
// Copies every matrix into one WeightMemory (each layer's tensors in their own
// 2 MiB-aligned extent, mbind-placed per policy before the copy touches it) and
// repoints the Mats at the copy. Data is pread() from f's file (no page faults
// on the file mapping), or copied from the mapping when that fails. With a
// shared_dir the copy is a store file (runtime/shared_weights.hpp) holding the
// same bytes, mapped read-only.
CopyResult copy_weights(const gguf::File& f, LlamaWeights& w, const CopyOptions& opts,
                        runtime::ThreadPool& pool);

}  // namespace epyctune::engine
