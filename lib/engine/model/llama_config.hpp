// Llama hyper-parameters read from GGUF metadata, and the tensor shapes they imply.
#pragma once

#include <cstdint>
#include <string>

namespace epyctune::engine {
namespace gguf {
class File;
}

struct LlamaConfig {
  int n_ctx = 0;       // llama.context_length
  int dim = 0;         // llama.embedding_length
  int n_layers = 0;    // llama.block_count
  int ffn_dim = 0;     // llama.feed_forward_length
  int n_heads = 0;     // llama.attention.head_count
  int n_kv_heads = 0;  // llama.attention.head_count_kv (default n_heads)
  int head_dim = 0;    // dim / n_heads
  int n_rot = 0;       // llama.rope.dimension_count (default head_dim)
  int n_vocab = 0;     // llama.vocab_size, else tokenizer.ggml.tokens length, else token_embd rows
  float norm_eps = 1e-5f;           // llama.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;  // llama.rope.freq_base
  float rope_freq_scale = 1.0f;     // 1 / llama.rope.scaling.factor when .type = linear
  std::string name;                 // general.name

  int kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads and checks the metadata; throws std::runtime_error naming the file,
// the key and what was expected ("llama.attention.head_count_kv = 5 does not
// divide head_count = 32").
LlamaConfig read_llama_config(const gguf::File& f);

}  // namespace epyctune::engine
