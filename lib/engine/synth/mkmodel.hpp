// Synthetic llama / qwen2 / qwen3 GGUF models with seeded weights: the test and
// benchmark models (no model files are ever committed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine {

struct ModelShape {
  std::string name = "custom";
  // general.architecture: llama, qwen2 (QKV biases, NeoX rope) or qwen3 (per-head
  // Q/K norms, NeoX rope).
  std::string arch = "llama";
  int dim = 64;
  int layers = 2;
  int heads = 4;
  int kv_heads = 4;
  int ffn = 192;
  int vocab = 512;
  int ctx = 512;
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied_output = false;   // no output.weight: the head reuses token_embd
  int head_dim_override = 0;  // attention.key_length when not dim / heads (qwen3)
  // Llama 3.1 rope scaling (config.json's rope_scaling): > 0 writes the
  // rope_freqs.weight tensor llama.cpp's converter computes from these.
  float rope_factor = 0.0f;
  float rope_low_freq = 1.0f, rope_high_freq = 4.0f;
  int rope_orig_ctx = 8192;
  // Mixture of experts (qwen3moe): experts per layer, how many run per token,
  // each expert's FFN width; 0 for dense models.
  int experts = 0, experts_used = 0, expert_ffn = 0;
  // deepseek2 (mkmodel_deepseek2.cpp): latent attention and DeepSeek routing.
  struct Deepseek2 {
    int q_lora = 0;  // 0: plain attn_q (V2-Lite)
    int kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
    int dense_lead = 0, shared = 0;  // leading dense layers, shared experts
    float weights_scale = 1.0f;
    bool weights_norm = false, sigmoid = false;
    int groups = 0, groups_used = 0;
    float yarn_factor = 0.0f;  // 0: no YaRN
    int yarn_orig_ctx = 4096;
    float yarn_log_mul = 0.0f;
    bool legacy_kv_b = false;  // one attn_kv_b instead of attn_k_b + attn_v_b
  } ds;
  // gpt-oss: attention.sliding_window (the even layers attend to the last
  // swa positions); its rope_factor / rope_orig_ctx are YaRN's.
  int swa = 0;

  int head_dim() const { return head_dim_override > 0 ? head_dim_override : dim / heads; }
  int q_dim() const { return heads * head_dim(); }
  int kv_dim() const { return kv_heads * head_dim(); }
  // Parameters (matrices + norms + embedding (+ output)).
  uint64_t n_params() const;
};

// Llama 3.1's rope_freqs: n_rot / 2 divisors of the rope angles, as llama.cpp's
// converter derives them from rope_scaling (factor, low/high_freq_factor,
// original_max_position_embeddings).
std::vector<float> llama3_rope_freqs(const ModelShape& s);

// "tiny" (dim 64, 2 layers, 4 heads / 2 kv, ffn 192, vocab 512),
// "1b" (llama-3.2-1B shape, vocab 32000, tied head),
// "7b" (LLaMA-2-7B: dim 4096, 32 layers, 32 heads, ffn 11008, vocab 32000),
// the real models' config.json geometry: "llama3.1-8b", "llama3.2-1b" (both
// with rope_freqs), "qwen2.5-7b", "qwen2.5-0.5b", "qwen3-8b", "qwen3-0.6b",
// "qwen3-30b-a3b" (qwen3moe: 128 experts of which 8 run, expert FFN 768),
// "deepseek-v2-lite" and "deepseek-v3" (deepseek2; their own keys:
// mkmodel_deepseek2.cpp);
// "gpt-oss-20b" / "gpt-oss-120b" (gpt-oss: 24 / 36 layers, 32 / 128 experts
// of which 4 run, sliding window 128, YaRN x32 over 4096);
// or key=value items "dim=..,layers=..,heads=..,kv_heads=..,ffn=..,vocab=..,
// ctx=..,head_dim=..,experts=..,experts_used=..,expert_ffn=..,rope_base=..,
// rope_factor=..,rope_orig_ctx=..,swa=..,eps=..,tied=..,arch=.."
// after an optional preset ("qwen2.5-7b,layers=2,vocab=8192"; without one,
// unset keys take tiny's values and kv_heads defaults to heads). Throws
// std::invalid_argument naming the bad key or inconsistency.
ModelShape parse_shape(std::string_view spec);
// The names parse_shape takes as a preset, and the quant names WriteOptions
// takes: the one list each, for help texts, errors and the checks that the
// bash completion offers them all (tests/packaging).
std::span<const std::string_view> shape_presets();
std::vector<std::string_view> quant_names();
void validate_shape(const ModelShape& s);  // throws std::invalid_argument

struct VocabSource {
  // Empty: a synthetic vocabulary of shape.vocab tokens (tokenizer's
  // write_synthetic_vocab, seeded). Otherwise copy the tokenizer of this GGUF
  // (copy_vocab); shape.vocab must then equal its token count.
  std::filesystem::path copy_from;
};

// Produces rows [row0, row0 + n_rows) of tensor `name` (ne0 floats per row)
// into out. Must be deterministic and thread-safe (rows are filled in parallel).
using TensorFiller = std::function<void(std::string_view name, int64_t ne0, int64_t row0,
                                        int64_t n_rows, float* out)>;

struct WriteOptions {
  // Weight type: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", or
  // "q4_k_m" (Q4_K, with Q6_K for output, ffn_down and attn_v as llama.cpp's
  // Q4_K_M mix), or "mxfp4_moe" (MXFP4 experts, Q8_0 for the other
  // matrices, as the released gpt-oss files). A tensor whose rows do not divide the block falls
  // back to q8_0 (rows of 32), else f16.
  std::string quant = "q4_0";
  uint64_t seed = 1;
  VocabSource vocab;
  std::string general_name;  // default "epyctune-synthetic-<shape>"
  TensorFiller filler;       // default: seeded_filler(seed)
  int threads = 0;           // quantisation threads; 0 = all allowed CPUs
  // Q4_K scales by min-max instead of ggml's search of 21 scales per
  // sub-block: about 20x faster to write, and the kernels' speed does not
  // change (only the rounding error does).
  bool fast_quant = false;
  std::function<void(std::string_view tensor, int index, int count)> progress;
  // More u32 metadata, e.g. a PARD-style draft's mask token.
  std::vector<std::pair<std::string, uint32_t>> extra_u32;
};

// The default weights: seeded, approximately normal values (Irwin-Hall of 4
// uniforms) with std 1/sqrt(ne0) for matrices (activations keep unit scale
// through every layer), 3/sqrt(ne0) for the output head (logit std ~3),
// std 1 for token_embd (3/sqrt(dim) when tied to the head), 1 for norms,
// 1 +- 0.5 for qwen3's Q/K norms and std 1 for qwen2's biases (both as large
// as what they modify, so a model that drops them decodes differently).
// Each row is seeded from (seed, tensor name, row): any thread count gives the
// same file.
TensorFiller seeded_filler(uint64_t seed, const ModelShape& shape);
TensorFiller seeded_filler(uint64_t seed);  // for an untied shape

// Writes a GGUF v3 file of shape.arch, streaming tensor by tensor (peak
// memory ~ one quantised tensor + a chunk of f32 rows per thread).
void write_model(const std::filesystem::path& path, const ModelShape& shape,
                 const WriteOptions& opts);

// The brief's short form: quant as a type, synthetic or copied vocabulary.
void write_model(const std::filesystem::path& path, const ModelShape& shape, GgmlType quant,
                 uint64_t seed, const VocabSource& vocab = {});

// The tensor type used for `tensor_name` (ne0 = row length) under `quant` in a
// model of n_layers layers (q4_k_m picks Q6_K layers as llama.cpp's use_more_bits;
// n_layers 0 = all of them).
GgmlType tensor_type_for(std::string_view quant, std::string_view tensor_name, int64_t ne0,
                         int n_layers = 0);

}  // namespace epyctune::engine
