#include "engine/model/llama_config.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "engine/gguf/gguf.hpp"

namespace epyctune::engine {
namespace {

struct Reader {
  const gguf::File& f;
  [[noreturn]] void fail(const std::string& msg) const {
    throw std::runtime_error(fmt::format("{}: {}", f.path(), msg));
  }
  // Integer keys are U32 in llama.cpp's files but any integer type is accepted.
  std::optional<int64_t> opt_int(const std::string& key) const {
    try {
      if (auto u = f.get_uint(key)) return static_cast<int64_t>(*u);
    } catch (const gguf::FormatError&) {
    }
    try {
      if (auto i = f.get_int(key)) return *i;
    } catch (const gguf::FormatError&) {
    }
    if (f.find(key)) fail(fmt::format("metadata key '{}' is not an integer", key));
    return std::nullopt;
  }
  int req_int(const std::string& key, int64_t min = 1, int64_t max = int64_t{1} << 30) const {
    auto v = opt_int(key);
    if (!v) fail(fmt::format("metadata key '{}' is missing (a llama model needs it)", key));
    if (*v < min || *v > max)
      fail(fmt::format("metadata key '{}' = {} is out of range [{}, {}]", key, *v, min, max));
    return static_cast<int>(*v);
  }
  std::optional<double> opt_float(const std::string& key) const {
    try {
      if (auto d = f.get_float(key)) return *d;
    } catch (const gguf::FormatError&) {
      if (auto i = opt_int(key)) return static_cast<double>(*i);
      fail(fmt::format("metadata key '{}' is not a number", key));
    }
    return std::nullopt;
  }
};

}  // namespace

LlamaConfig read_llama_config(const gguf::File& f) {
  Reader r{f};
  auto arch = f.get_string("general.architecture");
  if (!arch) r.fail("metadata key 'general.architecture' is missing");
  if (*arch != "llama")
    r.fail(fmt::format("general.architecture = '{}': only 'llama' models are supported", *arch));
  LlamaConfig c;
  c.name = f.get_string("general.name").value_or("");
  c.n_ctx = r.req_int("llama.context_length");
  c.dim = r.req_int("llama.embedding_length");
  c.n_layers = r.req_int("llama.block_count", 1, 4096);
  c.ffn_dim = r.req_int("llama.feed_forward_length");
  c.n_heads = r.req_int("llama.attention.head_count", 1, 1 << 16);
  c.n_kv_heads = r.opt_int("llama.attention.head_count_kv")
                     ? r.req_int("llama.attention.head_count_kv", 1, 1 << 16)
                     : c.n_heads;
  if (c.dim % c.n_heads != 0)
    r.fail(
        fmt::format("llama.embedding_length = {} is not a multiple of "
                    "llama.attention.head_count = {}",
                    c.dim, c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0)
    r.fail(
        fmt::format("llama.attention.head_count_kv = {} does not divide "
                    "llama.attention.head_count = {}",
                    c.n_kv_heads, c.n_heads));
  c.head_dim = c.dim / c.n_heads;
  if (c.head_dim % 2 != 0)
    r.fail(fmt::format("head dimension {} is odd: RoPE needs pairs", c.head_dim));
  c.n_rot = r.opt_int("llama.rope.dimension_count")
                ? r.req_int("llama.rope.dimension_count", 2, c.head_dim)
                : c.head_dim;
  if (c.n_rot % 2 != 0) r.fail(fmt::format("llama.rope.dimension_count = {} is odd", c.n_rot));
  if (auto eps = r.opt_float("llama.attention.layer_norm_rms_epsilon")) {
    if (!(*eps > 0 && *eps < 1))
      r.fail(fmt::format("llama.attention.layer_norm_rms_epsilon = {} is not in (0, 1)", *eps));
    c.norm_eps = static_cast<float>(*eps);
  }
  if (auto base = r.opt_float("llama.rope.freq_base")) {
    if (!(*base > 1)) r.fail(fmt::format("llama.rope.freq_base = {} must be > 1", *base));
    c.rope_freq_base = static_cast<float>(*base);
  }
  auto scaling = f.get_string("llama.rope.scaling.type");
  if (scaling && *scaling != "none") {
    if (*scaling != "linear")
      r.fail(fmt::format("llama.rope.scaling.type = '{}': only 'linear' (or 'none') is supported",
                         *scaling));
    auto factor = r.opt_float("llama.rope.scaling.factor");
    if (!factor || !(*factor >= 1))
      r.fail("llama.rope.scaling.type = linear needs llama.rope.scaling.factor >= 1");
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
  } else if (auto factor = r.opt_float("llama.rope.scaling.factor"); factor && *factor > 1) {
    // Older converters wrote only the factor, meaning linear scaling.
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
  }
  if (auto v = r.opt_int("llama.vocab_size")) {
    c.n_vocab = r.req_int("llama.vocab_size");
  } else if (const auto* toks = f.get_array("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int>(toks->items.size());
  } else if (const auto* t = f.tensor("token_embd.weight")) {
    c.n_vocab = static_cast<int>(t->ne[1]);
  }
  if (c.n_vocab <= 0)
    r.fail("vocabulary size unknown: no llama.vocab_size, tokenizer.ggml.tokens or token_embd");
  return c;
}

}  // namespace epyctune::engine
