// Hyper-parameters of a decoder-only transformer read from GGUF metadata: the
// architecture (general.architecture) decides which <arch>.* keys and tensors
// the file must hold, and which optional parts of a layer are present.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace epyctune::engine {
namespace gguf {
class File;
}

// The architectures the engine runs, by their general.architecture name.
enum class Arch { llama, qwen2, qwen3, qwen3moe, deepseek2, gpt_oss };

const char* arch_name(Arch a);
// "llama, qwen2, qwen3, qwen3moe, gpt-oss": for error messages.
std::string supported_arch_names();

// How rope angles are stretched for long contexts.
enum class RopeScaling {
  none,
  linear,  // theta *= freq_scale
  llama3,  // theta /= rope_freqs.weight[i] (Llama 3.1+: the file carries the factors)
  yarn,    // YaRN: interpolated low frequencies, extrapolated high ones, scaled magnitude
};

// deepseek2's multi-head latent attention (all 0 elsewhere). Q comes from
// attn_q, or (q_lora_rank > 0) attn_q_b(norm(attn_q_a x)); attn_kv_a_mqa gives
// a kv_lora_rank latent plus one rope key shared by every head, and the latent
// expands to each head's k_nope and v (attn_kv_b, or attn_k_b / attn_v_b as
// newer converters split it).
struct MlaConfig {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope = 0;          // head_dim - n_rot
  int v_head_dim = 0;       // value_length(_mla)
  bool split_kv_b = false;  // attn_k_b / attn_v_b instead of attn_kv_b
  // YaRN (rope.scaling.type = yarn): the multiplier of ln(factor) in the
  // attention scale's mscale (the original context is rope_orig_ctx).
  float yarn_log_mul = 0.0f;
};

// How router logits become expert probabilities.
enum class ExpertGating { softmax, sigmoid };

// How a MoE router's logits become the k experts and their weights.
enum class MoeGating {
  softmax_topk,  // softmax over every expert, then the top k probabilities (qwen3moe)
  topk_softmax,  // the top k logits, then a softmax over those k (gpt-oss)
};

// The gated activation of an expert: silu(gate) * up, or gpt-oss's
// clamped variant (ggml's swiglu_oai).
enum class GluKind { swiglu, swiglu_oai };

// What one layer's feed-forward block is: a dense SwiGLU, or a router over
// experts (each a SwiGLU of expert_ffn_dim) of which n_expert_used run per token.
enum class FfnKind { dense, moe };

struct LlamaConfig {
  Arch arch = Arch::llama;
  std::string arch_name = "llama";  // general.architecture: the prefix of every <arch>.* key
  int n_ctx = 0;                    // <arch>.context_length
  int dim = 0;                      // <arch>.embedding_length
  int n_layers = 0;                 // <arch>.block_count
  int ffn_dim = 0;                  // <arch>.feed_forward_length (dense layers)
  int n_heads = 0;                  // <arch>.attention.head_count
  int n_kv_heads = 0;               // <arch>.attention.head_count_kv (default n_heads)
  // <arch>.attention.key_length (default dim / n_heads); qwen3's can differ
  // from dim / n_heads, so Q and the attention output are n_heads * head_dim wide.
  int head_dim = 0;
  int n_rot = 0;    // <arch>.rope.dimension_count (default head_dim)
  int n_vocab = 0;  // <arch>.vocab_size, else tokenizer.ggml.tokens length, else token_embd rows
  float norm_eps = 1e-5f;           // <arch>.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;  // <arch>.rope.freq_base
  float rope_freq_scale = 1.0f;     // 1 / <arch>.rope.scaling.factor when .type = linear
  RopeScaling rope_scaling = RopeScaling::none;
  // NeoX rotation (pairs i, i + n_rot/2) instead of adjacent pairs: llama.cpp's
  // rope type for the qwen family.
  bool rope_neox = false;
  bool attn_qkv_bias = false;  // qwen2: attn_{q,k,v}.bias
  bool attn_qk_norm = false;   // qwen3: attn_{q,k}_norm, an RMS norm per head before rope
  // gpt-oss: attn_output.bias, attn_sinks (a learned logit per head in the
  // softmax denominator), post_attention_norm as the FFN's input norm, and
  // biases on the router and every expert matrix.
  bool attn_out_bias = false;
  bool attn_sinks = false;
  bool moe_biases = false;
  // <arch>.attention.sliding_window: layers for which swa_layer() holds attend
  // to the last n_swa positions only (0: every layer attends to all).
  int n_swa = 0;
  // YaRN (RopeScaling::yarn): <arch>.rope.scaling.original_context_length,
  // and llama.cpp's defaults for the parameters GGUF files do not carry.
  int rope_orig_ctx = 0;
  float yarn_ext_factor = 1.0f, yarn_attn_factor = 1.0f;
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;

  // Mixture of experts (0 when dense).
  int n_expert = 0;                  // <arch>.expert_count
  int n_expert_used = 0;             // <arch>.expert_used_count: top-k per token
  int expert_ffn_dim = 0;            // <arch>.expert_feed_forward_length
  bool expert_weights_norm = false;  // renormalise the top-k router weights to sum 1
  // deepseek2: the first n_dense_lead layers are dense; the others add
  // n_expert_shared always-on experts (one SwiGLU of n_expert_shared *
  // expert_ffn_dim), scale the routed weights, and may route by groups.
  int n_dense_lead = 0;
  int n_expert_shared = 0;
  float expert_weights_scale = 0.0f;  // 0: none
  ExpertGating expert_gating = ExpertGating::softmax;
  int n_expert_groups = 0, n_group_used = 0;
  MlaConfig mla;
  MoeGating moe_gating = MoeGating::softmax_topk;
  GluKind expert_glu = GluKind::swiglu;

  std::string name;  // general.name

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // The full metadata key for a per-architecture suffix ("attention.head_count").
  std::string key(std::string_view suffix) const { return arch_name + "." + std::string(suffix); }
  // The FFN kind of layer il (a MoE architecture's leading dense layers aside).
  FfnKind ffn_kind(int il) const {
    return n_expert > 0 && il >= n_dense_lead ? FfnKind::moe : FfnKind::dense;
  }
  // Whether layer il attends through the sliding window: llama.cpp's pattern
  // for gpt-oss (period 2), the even layers.
  bool swa_layer(int il) const { return n_swa > 0 && il % 2 == 0; }
};

// Reads and checks the metadata; throws std::runtime_error naming the file,
// the key and what was expected ("qwen2.attention.head_count_kv = 5 does not
// divide head_count = 32"), or the architecture and the supported ones.
LlamaConfig read_llama_config(const gguf::File& f);

}  // namespace epyctune::engine
