#include "engine/model/llama_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "engine/gguf/gguf.hpp"

namespace epyctune::engine {
namespace {

struct ArchInfo {
  Arch arch;
  const char* name;
  bool rope_neox;
  bool qkv_bias;
  bool qk_norm;
  bool moe;
  bool gpt_oss;  // sinks, sliding window, biases everywhere, swiglu_oai experts
};

// llama.cpp's rope type per architecture: NORM (adjacent pairs) for llama,
// NEOX for the qwen family and gpt-oss (LLM_ARCH_OPENAI_MOE).
constexpr std::array<ArchInfo, 6> kArchs{{
    {Arch::llama, "llama", false, false, false, false, false},
    {Arch::qwen2, "qwen2", true, true, false, false, false},
    {Arch::qwen3, "qwen3", true, false, true, false, false},
    {Arch::qwen3moe, "qwen3moe", true, false, true, true, false},
    {Arch::deepseek2, "deepseek2", false, false, false, true, false},
    {Arch::gpt_oss, "gpt-oss", true, true, false, true, true},
}};

const ArchInfo& info(Arch a) {
  for (const auto& i : kArchs)
    if (i.arch == a) return i;
  throw std::logic_error("unknown Arch");
}

// The <arch>.* keys the engine reads. Any other key under the architecture's
// prefix changes the model in a way the engine does not implement (sliding
// windows, yarn, logit soft-capping...), so it is an error, never ignored.
constexpr std::array<std::string_view, 16> kCommonKeys{
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    // Llama 3.1's scaling parameters: the factors they imply are in the
    // rope_freqs tensor, which is what the engine reads.
    "rope.scaling.low_freq_factor",
    "rope.scaling.high_freq_factor",
    "rope.scaling.original_context_length",
};
constexpr std::array<std::string_view, 1> kOtherKeys{"vocab_size"};
constexpr std::array<std::string_view, 4> kMoeKeys{
    "expert_count", "expert_used_count", "expert_feed_forward_length", "expert_weights_norm"};

// deepseek2's latent attention, leading dense layers, shared experts and
// routing, and its YaRN multiplier.
constexpr std::array<std::string_view, 11> kDeepseek2Keys{"leading_dense_block_count",
                                                          "attention.q_lora_rank",
                                                          "attention.kv_lora_rank",
                                                          "attention.key_length_mla",
                                                          "attention.value_length_mla",
                                                          "expert_shared_count",
                                                          "expert_weights_scale",
                                                          "expert_gating_func",
                                                          "expert_group_count",
                                                          "expert_group_used_count",
                                                          "rope.scaling.yarn_log_multiplier"};

constexpr std::array<std::string_view, 1> kGptOssKeys{"attention.sliding_window"};

bool known_key(const ArchInfo& a, std::string_view suffix) {
  auto in = [&](const auto& set) { return std::find(set.begin(), set.end(), suffix) != set.end(); };
  return in(kCommonKeys) || in(kOtherKeys) || (a.moe && in(kMoeKeys)) ||
         (a.arch == Arch::deepseek2 && in(kDeepseek2Keys)) || (a.gpt_oss && in(kGptOssKeys));
}

struct Reader {
  const gguf::File& f;
  std::string prefix;  // "qwen2."
  std::string arch;
  [[noreturn]] void fail(const std::string& msg) const {
    throw std::runtime_error(fmt::format("{}: {}", f.path(), msg));
  }
  std::string key(std::string_view s) const { return prefix + std::string(s); }
  // Integer keys are U32 in llama.cpp's files but any integer type is accepted.
  std::optional<int64_t> opt_int(std::string_view suffix) const {
    const std::string k = key(suffix);
    try {
      if (auto u = f.get_uint(k)) return static_cast<int64_t>(*u);
    } catch (const gguf::FormatError&) {
    }
    try {
      if (auto i = f.get_int(k)) return *i;
    } catch (const gguf::FormatError&) {
    }
    if (f.find(k)) fail(fmt::format("metadata key '{}' is not an integer", k));
    return std::nullopt;
  }
  int req_int(std::string_view suffix, int64_t min = 1, int64_t max = int64_t{1} << 30) const {
    auto v = opt_int(suffix);
    if (!v)
      fail(fmt::format("metadata key '{}' is missing (a {} model needs it)", key(suffix), arch));
    if (*v < min || *v > max)
      fail(fmt::format("metadata key '{}' = {} is out of range [{}, {}]", key(suffix), *v, min,
                       max));
    return static_cast<int>(*v);
  }
  int int_or(std::string_view suffix, int def, int64_t min, int64_t max) const {
    return opt_int(suffix) ? req_int(suffix, min, max) : def;
  }
  std::optional<double> opt_float(std::string_view suffix) const {
    const std::string k = key(suffix);
    try {
      if (auto d = f.get_float(k)) return *d;
    } catch (const gguf::FormatError&) {
      if (auto i = opt_int(suffix)) return static_cast<double>(*i);
      fail(fmt::format("metadata key '{}' is not a number", k));
    }
    return std::nullopt;
  }
};

const ArchInfo& read_arch(const Reader& r) {
  auto arch = r.f.get_string("general.architecture");
  if (!arch) r.fail("metadata key 'general.architecture' is missing");
  for (const auto& i : kArchs)
    if (*arch == i.name) return i;
  r.fail(fmt::format("general.architecture = '{}' is not supported (supported: {})", *arch,
                     supported_arch_names()));
}

void check_keys(const Reader& r, const ArchInfo& a) {
  for (const auto& [k, v] : r.f.metadata()) {
    if (k.rfind(r.prefix, 0) != 0) continue;
    const std::string_view suffix = std::string_view(k).substr(r.prefix.size());
    if (!known_key(a, suffix))
      r.fail(fmt::format(
          "metadata key '{}' is not supported for general.architecture = '{}': the engine does "
          "not implement what it changes (supported keys: {}.{{context_length, embedding_length, "
          "block_count, feed_forward_length, attention.*, rope.freq_base, rope.dimension_count, "
          "rope.scaling.*{}{}}})",
          k, a.name, a.name, a.moe ? ", expert_*" : "",
          a.gpt_oss ? ", attention.sliding_window" : ""));
  }
}

// deepseek2's head geometry. Newer converters write the latent cache's shape
// as key_length (kv_lora_rank + rope dims) and value_length (kv_lora_rank),
// the expanded heads' as key_length_mla / value_length_mla, and split
// attn_kv_b into attn_k_b / attn_v_b; older files have key_length /
// value_length for the expanded heads and one attn_kv_b.
void read_mla_geometry(const Reader& r, LlamaConfig& c) {
  auto& m = c.mla;
  m.q_lora_rank = r.int_or("attention.q_lora_rank", 0, 0, 1 << 16);
  m.kv_lora_rank = r.req_int("attention.kv_lora_rank", 1, 1 << 16);
  c.n_rot = r.req_int("rope.dimension_count", 2, 1 << 16);
  m.split_kv_b = r.opt_int("attention.key_length_mla").has_value();
  if (m.split_kv_b) {
    c.head_dim = r.req_int("attention.key_length_mla", 1, 1 << 16);
    m.v_head_dim = r.req_int("attention.value_length_mla", 1, 1 << 16);
    const int kl = r.int_or("attention.key_length", m.kv_lora_rank + c.n_rot, 1, 1 << 16);
    const int vl = r.int_or("attention.value_length", m.kv_lora_rank, 1, 1 << 16);
    if (kl != m.kv_lora_rank + c.n_rot || vl != m.kv_lora_rank)
      r.fail(fmt::format(
          "{} = {} and {} = {}: with {} these must be kv_lora_rank + rope.dimension_count = {} "
          "and kv_lora_rank = {}",
          r.key("attention.key_length"), kl, r.key("attention.value_length"), vl,
          r.key("attention.key_length_mla"), m.kv_lora_rank + c.n_rot, m.kv_lora_rank));
  } else {
    c.head_dim = r.req_int("attention.key_length", 1, 1 << 16);
    m.v_head_dim = r.req_int("attention.value_length", 1, 1 << 16);
  }
  if (c.n_rot % 2 != 0 || c.n_rot >= c.head_dim)
    r.fail(fmt::format("{} = {} must be even and below the key head size {}",
                       r.key("rope.dimension_count"), c.n_rot, c.head_dim));
  m.qk_nope = c.head_dim - c.n_rot;
  // The engine expands the latent to every head (multi-head attention);
  // the file's head_count_kv is 1 (the latent cache) or head_count.
  c.n_kv_heads = c.n_heads;
}

void read_deepseek2_moe(const Reader& r, LlamaConfig& c) {
  c.n_dense_lead = r.int_or("leading_dense_block_count", 0, 0, c.n_layers);
  c.n_expert_shared = r.int_or("expert_shared_count", 0, 0, 1 << 10);
  if (auto s = r.opt_float("expert_weights_scale")) c.expert_weights_scale = static_cast<float>(*s);
  // llama.cpp's llama_expert_gating_func_type: 0 (unset) and 1 softmax, 2 sigmoid.
  const int g = r.int_or("expert_gating_func", 0, 0, 1 << 10);
  if (g > 2)
    r.fail(fmt::format("{} = {} is not supported (1: softmax, 2: sigmoid)",
                       r.key("expert_gating_func"), g));
  c.expert_gating = g == 2 ? ExpertGating::sigmoid : ExpertGating::softmax;
  c.n_expert_groups = r.int_or("expert_group_count", 0, 0, c.n_expert);
  c.n_group_used = r.int_or("expert_group_used_count", 0, 0, c.n_expert);
  if (c.n_expert_groups > 1 &&
      (c.n_expert % c.n_expert_groups != 0 || c.n_group_used < 1 ||
       c.n_group_used >= c.n_expert_groups ||
       c.n_group_used * (c.n_expert / c.n_expert_groups) < c.n_expert_used))
    r.fail(fmt::format(
        "{} = {} and {} = {} do not fit {} experts of which {} run (the groups must divide the "
        "experts, and the groups used hold at least expert_used_count)",
        r.key("expert_group_count"), c.n_expert_groups, r.key("expert_group_used_count"),
        c.n_group_used, c.n_expert, c.n_expert_used));
}

void read_geometry(const Reader& r, LlamaConfig& c) {
  c.n_ctx = r.req_int("context_length");
  c.dim = r.req_int("embedding_length");
  c.n_layers = r.req_int("block_count", 1, 4096);
  c.ffn_dim = r.req_int("feed_forward_length");
  c.n_heads = r.req_int("attention.head_count", 1, 1 << 16);
  c.n_kv_heads = r.int_or("attention.head_count_kv", c.n_heads, 1, 1 << 16);
  if (c.n_heads % c.n_kv_heads != 0)
    r.fail(fmt::format("{} = {} does not divide {} = {}", r.key("attention.head_count_kv"),
                       c.n_kv_heads, r.key("attention.head_count"), c.n_heads));
  if (c.arch == Arch::deepseek2) return read_mla_geometry(r, c);
  if (!r.opt_int("attention.key_length") && c.dim % c.n_heads != 0)
    r.fail(fmt::format("{} = {} is not a multiple of {} = {} (and no {})",
                       r.key("embedding_length"), c.dim, r.key("attention.head_count"), c.n_heads,
                       r.key("attention.key_length")));
  c.head_dim = r.int_or("attention.key_length", c.dim / c.n_heads, 2, 1 << 16);
  const int vlen = r.int_or("attention.value_length", c.head_dim, 1, 1 << 16);
  if (vlen != c.head_dim)
    r.fail(fmt::format("{} = {} differs from {} = {}: only equal key and value heads are supported",
                       r.key("attention.value_length"), vlen, r.key("attention.key_length"),
                       c.head_dim));
  if (c.head_dim % 2 != 0)
    r.fail(fmt::format("head dimension {} is odd: RoPE needs pairs", c.head_dim));
  c.n_rot = r.int_or("rope.dimension_count", c.head_dim, 2, c.head_dim);
  if (c.n_rot % 2 != 0)
    r.fail(fmt::format("{} = {} is odd", r.key("rope.dimension_count"), c.n_rot));
}

void read_rope(const Reader& r, LlamaConfig& c) {
  if (auto base = r.opt_float("rope.freq_base")) {
    if (!(*base > 1)) r.fail(fmt::format("{} = {} must be > 1", r.key("rope.freq_base"), *base));
    c.rope_freq_base = static_cast<float>(*base);
  }
  auto scaling = r.f.get_string(r.key("rope.scaling.type"));
  auto factor = r.opt_float("rope.scaling.factor");
  // llama.cpp reads rope_freqs for llama only; elsewhere the tensor is
  // reported as unused.
  const bool has_freqs = c.arch == Arch::llama && r.f.tensor("rope_freqs.weight") != nullptr;
  if (scaling && *scaling == "linear") {
    if (!factor || !(*factor >= 1))
      r.fail(fmt::format("{} = linear needs {} >= 1", r.key("rope.scaling.type"),
                         r.key("rope.scaling.factor")));
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
    c.rope_scaling = RopeScaling::linear;
  } else if (scaling && *scaling == "llama3") {
    if (!has_freqs)
      r.fail(fmt::format("{} = llama3 needs the tensor 'rope_freqs.weight', which is missing",
                         r.key("rope.scaling.type")));
  } else if (scaling && *scaling == "yarn" &&
             (c.arch == Arch::gpt_oss || c.arch == Arch::deepseek2)) {
    // YaRN is checked against llama.cpp on these architectures only:
    // elsewhere it stays an error until it is.
    if (!factor || !(*factor >= 1))
      r.fail(fmt::format("{} = yarn needs {} >= 1", r.key("rope.scaling.type"),
                         r.key("rope.scaling.factor")));
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
    c.rope_scaling = RopeScaling::yarn;
    if (c.arch == Arch::deepseek2) {
      c.rope_orig_ctx = r.req_int("rope.scaling.original_context_length");
      // llama.cpp divides the converter's value by 0.1 and multiplies by 0.1
      // where it uses it: the file's value is what scales ln(factor).
      if (auto m = r.opt_float("rope.scaling.yarn_log_multiplier"))
        c.mla.yarn_log_mul = static_cast<float>(*m);
    } else {
      // llama.cpp's fallback when the file does not say: the training context.
      c.rope_orig_ctx = r.int_or("rope.scaling.original_context_length", c.n_ctx, 1, 1 << 30);
    }
  } else if (scaling && *scaling != "none") {
    r.fail(
        fmt::format("{} = '{}' is not supported (supported: none, linear, llama3 with "
                    "rope_freqs.weight{})",
                    r.key("rope.scaling.type"), *scaling,
                    c.arch == Arch::deepseek2 || c.arch == Arch::gpt_oss ? ", yarn" : ""));
  } else if (!scaling && factor && *factor > 1 && !has_freqs) {
    // Older converters wrote only the factor, meaning linear scaling.
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
    c.rope_scaling = RopeScaling::linear;
  }
  // Llama 3.1+ files carry the per-frequency divisors as a tensor (llama.cpp's
  // converter computes them from rope_scaling in config.json, and writes no
  // scaling type): their presence decides.
  if (has_freqs) {
    if (c.rope_scaling == RopeScaling::linear || c.rope_scaling == RopeScaling::yarn)
      r.fail(fmt::format("{} = {} and a rope_freqs.weight tensor: only one rope scaling can apply",
                         r.key("rope.scaling.type"),
                         c.rope_scaling == RopeScaling::yarn ? "yarn" : "linear"));
    c.rope_scaling = RopeScaling::llama3;
  }
}

void read_moe(const Reader& r, const ArchInfo& a, LlamaConfig& c) {
  if (!a.moe) return;
  c.n_expert = r.req_int("expert_count", 1, 1 << 12);
  c.n_expert_used = r.req_int("expert_used_count", 1, c.n_expert);
  c.expert_ffn_dim = r.req_int("expert_feed_forward_length");
  // llama.cpp's qwen3moe always renormalises the top-k weights.
  c.expert_weights_norm = a.arch == Arch::qwen3moe;
  if (auto v = r.f.get_bool(r.key("expert_weights_norm"))) c.expert_weights_norm = *v;
  if (a.arch == Arch::deepseek2) read_deepseek2_moe(r, c);
  if (!a.gpt_oss) return;
  // llama.cpp's LLM_ARCH_OPENAI_MOE: the top k router logits, softmaxed
  // (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT), no renormalisation.
  c.moe_gating = MoeGating::topk_softmax;
  c.expert_glu = GluKind::swiglu_oai;
  c.moe_biases = true;
}

void read_gpt_oss(const Reader& r, const ArchInfo& a, LlamaConfig& c) {
  if (!a.gpt_oss) return;
  c.attn_out_bias = true;
  c.attn_sinks = true;
  c.n_swa = r.req_int("attention.sliding_window");
}

void read_vocab(const Reader& r, LlamaConfig& c) {
  if (r.opt_int("vocab_size")) {
    c.n_vocab = r.req_int("vocab_size");
  } else if (const auto* toks = r.f.get_array("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int>(toks->items.size());
  } else if (const auto* t = r.f.tensor("token_embd.weight")) {
    c.n_vocab = static_cast<int>(t->ne[1]);
  }
  if (c.n_vocab <= 0)
    r.fail(fmt::format("vocabulary size unknown: no {}, tokenizer.ggml.tokens or token_embd",
                       r.key("vocab_size")));
}

}  // namespace

const char* arch_name(Arch a) {
  return info(a).name;
}

std::string supported_arch_names() {
  std::string out;
  for (const auto& i : kArchs) out += (out.empty() ? "" : ", ") + std::string(i.name);
  return out;
}

LlamaConfig read_llama_config(const gguf::File& f) {
  Reader r{f, "", ""};
  const ArchInfo& a = read_arch(r);
  r.arch = a.name;
  r.prefix = r.arch + ".";
  check_keys(r, a);
  LlamaConfig c;
  c.arch = a.arch;
  c.arch_name = a.name;
  c.rope_neox = a.rope_neox;
  c.attn_qkv_bias = a.qkv_bias;
  c.attn_qk_norm = a.qk_norm;
  c.name = f.get_string("general.name").value_or("");
  read_geometry(r, c);
  if (auto eps = r.opt_float("attention.layer_norm_rms_epsilon")) {
    if (!(*eps > 0 && *eps < 1))
      r.fail(
          fmt::format("{} = {} is not in (0, 1)", r.key("attention.layer_norm_rms_epsilon"), *eps));
    c.norm_eps = static_cast<float>(*eps);
  }
  read_rope(r, c);
  read_moe(r, a, c);
  read_gpt_oss(r, a, c);
  read_vocab(r, c);
  return c;
}

}  // namespace epyctune::engine
