#include "engine/synth/mkmodel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/synth/gguf_writer.hpp"
#include "engine/synth/mkmodel_deepseek2.hpp"
#include "engine/synth/vocab_writer.hpp"

namespace epyctune::engine {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

// blk.N.xxx -> N, else -1.
int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int n = -1;
  auto r = std::from_chars(name.data() + 4, name.data() + name.size(), n);
  return r.ec == std::errc() ? n : -1;
}

// Every --quant name, with llama.cpp's llama_ftype number for
// general.file_type: the one list of what tensor_type_for accepts. q4_k and
// q5_k are all Q4_K / Q5_K (llama.cpp's MOSTLY_Q4_K_S, MOSTLY_Q5_K_S).
struct QuantName {
  std::string_view name;
  uint32_t file_type;
};
constexpr QuantName kQuants[] = {
    {"f32", 0},    {"f16", 1},     {"bf16", 32},   {"q8_0", 7},       {"q4_0", 2},
    {"q5_0", 8},   {"q5_1", 9},    {"q4_k", 14},   {"q5_k", 16},      {"q6_k", 18},
    {"mxfp4", 38}, {"q4_k_m", 15}, {"q5_k_m", 17}, {"mxfp4_moe", 38},
};

// Every shape preset's name: the one list preset() accepts.
constexpr std::string_view kShapes[] = {
    "tiny",
    "1b",
    "7b",
    "llama3.1-8b",
    "llama3.2-1b",
    "qwen2.5-7b",
    "qwen2.5-0.5b",
    "qwen3-8b",
    "qwen3-0.6b",
    "qwen3-30b-a3b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "gpt-oss-20b",
    "gpt-oss-120b",
};

const QuantName* find_quant(std::string_view quant) {
  for (const auto& q : kQuants)
    if (q.name == quant) return &q;
  return nullptr;
}

uint32_t file_type_of(std::string_view quant) {
  const QuantName* q = find_quant(quant);
  return q ? q->file_type : 0;
}

// The released models' config.json values (hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
// vocab_size, max_position_embeddings, rope_theta, rms_norm_eps,
// tie_word_embeddings, rope_scaling).
bool real_preset(std::string_view name, ModelShape& s) {
  s.name = std::string(name);
  if (name == "llama3.1-8b" || name == "llama3.2-1b") {
    const bool big = name == "llama3.1-8b";
    s.arch = "llama";
    s.dim = big ? 4096 : 2048, s.layers = big ? 32 : 16, s.heads = 32, s.kv_heads = 8;
    s.ffn = big ? 14336 : 8192, s.vocab = 128256, s.ctx = 131072, s.rope_base = 500000.0f;
    s.rope_factor = big ? 8.0f : 32.0f, s.tied_output = !big;
  } else if (name == "qwen2.5-7b") {
    s.arch = "qwen2";
    s.dim = 3584, s.layers = 28, s.heads = 28, s.kv_heads = 4, s.ffn = 18944, s.vocab = 152064;
    s.ctx = 32768, s.rope_base = 1000000.0f, s.norm_eps = 1e-6f;
  } else if (name == "qwen2.5-0.5b") {
    s.arch = "qwen2";
    s.dim = 896, s.layers = 24, s.heads = 14, s.kv_heads = 2, s.ffn = 4864, s.vocab = 151936;
    s.ctx = 32768, s.rope_base = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = true;
  } else if (name == "qwen3-8b" || name == "qwen3-0.6b") {
    const bool big = name == "qwen3-8b";
    s.arch = "qwen3";
    s.dim = big ? 4096 : 1024, s.layers = big ? 36 : 28, s.heads = big ? 32 : 16;
    s.kv_heads = 8, s.head_dim_override = 128, s.ffn = big ? 12288 : 3072, s.vocab = 151936;
    s.ctx = 40960, s.rope_base = 1000000.0f, s.norm_eps = 1e-6f, s.tied_output = !big;
  } else if (name == "qwen3-30b-a3b") {
    s.arch = "qwen3moe";
    s.dim = 2048, s.layers = 48, s.heads = 32, s.kv_heads = 4, s.head_dim_override = 128;
    s.ffn = 6144, s.experts = 128, s.experts_used = 8, s.expert_ffn = 768, s.vocab = 151936;
    s.ctx = 40960, s.rope_base = 1000000.0f, s.norm_eps = 1e-6f;
  } else if (name == "gpt-oss-20b" || name == "gpt-oss-120b") {
    const bool big = name == "gpt-oss-120b";
    s.arch = "gpt-oss";
    s.dim = 2880, s.layers = big ? 36 : 24, s.heads = 64, s.kv_heads = 8, s.head_dim_override = 64;
    s.ffn = 2880, s.experts = big ? 128 : 32, s.experts_used = 4, s.expert_ffn = 2880;
    s.vocab = 201088, s.ctx = 131072, s.rope_base = 150000.0f, s.swa = 128;
    s.rope_factor = 32.0f, s.rope_orig_ctx = 4096;
  } else {
    return false;
  }
  return true;
}

ModelShape preset(std::string_view name) {
  ModelShape s;
  if (std::find(std::begin(kShapes), std::end(kShapes), name) == std::end(kShapes))
    throw std::invalid_argument(
        fmt::format("unknown shape preset '{}' ({})", name, fmt::join(kShapes, ", ")));
  if (name == "tiny") {
    s.name = "tiny";
    s.dim = 64, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.ffn = 192, s.vocab = 512;
    s.ctx = 512;
  } else if (name == "1b") {
    // Llama-3.2-1B's body with a 32000-token vocabulary.
    s.name = "1b";
    s.dim = 2048, s.layers = 16, s.heads = 32, s.kv_heads = 8, s.ffn = 8192, s.vocab = 32000;
    s.ctx = 4096, s.rope_base = 500000.0f, s.tied_output = true;
  } else if (name == "7b") {
    s.name = "7b";
    s.dim = 4096, s.layers = 32, s.heads = 32, s.kv_heads = 32, s.ffn = 11008, s.vocab = 32000;
    s.ctx = 4096;
  } else if (!real_preset(name, s) && !deepseek2_preset(name, s)) {
    throw std::logic_error(fmt::format("shape preset '{}' is listed but not defined", name));
  }
  return s;
}

// general.* and the <arch>.* hyper-parameters, as llama.cpp's converter names them.
void write_hparams(gguf::Writer& w, const ModelShape& s, const WriteOptions& opts) {
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name",
               opts.general_name.empty() ? "epyctune-synthetic-" + s.name : opts.general_name);
  w.set_u32("general.file_type", file_type_of(opts.quant));
  w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", s.ctx);
  w.set_u32(a + "embedding_length", s.dim);
  w.set_u32(a + "block_count", s.layers);
  w.set_u32(a + "feed_forward_length", s.ffn);
  w.set_u32(a + "attention.head_count", s.heads);
  w.set_u32(a + "attention.head_count_kv", s.kv_heads);
  if (s.head_dim_override > 0) {
    w.set_u32(a + "attention.key_length", s.head_dim());
    w.set_u32(a + "attention.value_length", s.head_dim());
  }
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.norm_eps);
  w.set_f32(a + "rope.freq_base", s.rope_base);
  w.set_u32(a + "rope.dimension_count", s.head_dim());
  w.set_u32(a + "vocab_size", s.vocab);
  if (s.experts > 0) {
    w.set_u32(a + "expert_count", s.experts);
    w.set_u32(a + "expert_used_count", s.experts_used);
    w.set_u32(a + "expert_feed_forward_length", s.expert_ffn);
  }
  if (s.arch == "deepseek2") write_deepseek2_hparams(w, s);
  if (s.arch == "gpt-oss") {
    w.set_u32(a + "attention.sliding_window", s.swa);
    if (s.rope_factor > 0) {
      w.set_string(a + "rope.scaling.type", "yarn");
      w.set_f32(a + "rope.scaling.factor", s.rope_factor);
      w.set_u32(a + "rope.scaling.original_context_length", s.rope_orig_ctx);
    }
  }
}

}  // namespace

uint64_t ModelShape::n_params() const {
  if (arch == "deepseek2") return deepseek2_params(*this);
  uint64_t d = dim, q = q_dim(), kv = kv_dim();
  uint64_t per_layer = d * q * 2 + d * kv * 2 + 2 * d;
  per_layer +=
      experts > 0 ? uint64_t(experts) * (d * uint64_t(expert_ffn) * 3 + d) : d * uint64_t(ffn) * 3;
  if (arch == "qwen2") per_layer += q + 2 * kv;
  if (arch == "gpt-oss")  // biases, sinks, the router's and the experts' biases
    per_layer += q + 2 * kv + d + heads + uint64_t(experts) * (2 * uint64_t(expert_ffn) + d + 1);
  if (arch == "qwen3" || arch == "qwen3moe") per_layer += 2 * uint64_t(head_dim());
  return uint64_t(vocab) * d * (tied_output ? 1 : 2) + d + per_layer * layers;
}

std::vector<float> llama3_rope_freqs(const ModelShape& s) {
  const int half = s.head_dim() / 2;
  std::vector<float> out(half, 1.0f);
  if (s.rope_factor <= 0) return out;
  const double low_wavelen = s.rope_orig_ctx / s.rope_low_freq;
  const double high_wavelen = s.rope_orig_ctx / s.rope_high_freq;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(double(s.rope_base), -2.0 * i / s.head_dim());
    const double wavelen = 2.0 * M_PI / freq;
    double f = 1.0;  // short wavelengths keep their angle
    if (wavelen > low_wavelen) {
      f = s.rope_factor;  // long ones are stretched by the whole factor
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (s.rope_orig_ctx / wavelen - s.rope_low_freq) / (s.rope_high_freq - s.rope_low_freq);
      f = 1.0 / ((1.0 - smooth) / s.rope_factor + smooth);
    }
    out[i] = static_cast<float>(f);
  }
  return out;
}

void validate_shape(const ModelShape& s) {
  auto bad = [&](const std::string& m) {
    throw std::invalid_argument(fmt::format("shape '{}': {}", s.name, m));
  };
  for (auto [k, v] : {std::pair{"dim", s.dim},
                      {"layers", s.layers},
                      {"heads", s.heads},
                      {"kv_heads", s.kv_heads},
                      {"ffn", s.ffn},
                      {"vocab", s.vocab},
                      {"ctx", s.ctx}})
    if (v <= 0) bad(fmt::format("{} = {} must be > 0", k, v));
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "qwen3moe" &&
      s.arch != "deepseek2" && s.arch != "gpt-oss")
    bad(fmt::format(
        "arch '{}' is not one mkmodel writes (llama, qwen2, qwen3, qwen3moe, deepseek2, gpt-oss)",
        s.arch));
  if ((s.arch == "qwen3moe" || s.arch == "deepseek2" || s.arch == "gpt-oss") != (s.experts > 0))
    bad(fmt::format(
        "experts = {}: qwen3moe, deepseek2 and gpt-oss need experts > 0, other architectures "
        "are dense",
        s.experts));
  if (s.arch == "deepseek2") validate_deepseek2(s);
  if ((s.arch == "gpt-oss") != (s.swa > 0))
    bad(fmt::format("swa = {}: gpt-oss needs a sliding window > 0, other architectures have none",
                    s.swa));
  if (s.experts > 0 && (s.experts_used < 1 || s.experts_used > s.experts))
    bad(fmt::format("experts_used = {} must be in [1, experts = {}]", s.experts_used, s.experts));
  if (s.experts > 0 && (s.expert_ffn <= 0 || s.expert_ffn % 32))
    bad(fmt::format("expert_ffn = {} must be a positive multiple of 32", s.expert_ffn));
  if (s.rope_factor > 0 && s.arch != "llama" && s.arch != "gpt-oss")
    bad(fmt::format("rope_factor (Llama 3.1's rope_freqs, gpt-oss's YaRN) is not {}'s", s.arch));
  if (s.head_dim_override <= 0 && s.dim % s.heads)
    bad(fmt::format("dim {} is not a multiple of heads {} (or set head_dim)", s.dim, s.heads));
  if (s.heads % s.kv_heads)
    bad(fmt::format("kv_heads {} does not divide heads {}", s.kv_heads, s.heads));
  if (s.head_dim() % 2) bad(fmt::format("head dim {} is odd (RoPE rotates pairs)", s.head_dim()));
  if (s.dim % 32 || s.ffn % 32)
    bad(fmt::format("dim {} and ffn {} must be multiples of 32 (quant block)", s.dim, s.ffn));
  if (s.vocab < 259) bad(fmt::format("vocab {} < 259 (3 specials + 256 byte tokens)", s.vocab));
}

std::span<const std::string_view> shape_presets() {
  return kShapes;
}

std::vector<std::string_view> quant_names() {
  std::vector<std::string_view> out;
  for (const auto& q : kQuants) out.push_back(q.name);
  return out;
}

ModelShape parse_shape(std::string_view spec) {
  if (spec.find('=') == std::string_view::npos) return preset(spec);
  const auto first = spec.substr(0, spec.find(','));
  const bool based = first.find('=') == std::string_view::npos;
  ModelShape s = preset(based ? first : "tiny");
  s.name = std::string(spec);
  bool kv_set = based;  // a preset's kv_heads stays unless overridden
  if (based) spec.remove_prefix(std::min(spec.size(), first.size() + 1));
  while (!spec.empty()) {
    auto comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument(fmt::format("shape: '{}' is not key=value", item));
    std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "rope_base" || key == "eps" || key == "rope_factor") {
      float f = std::strtof(std::string(val).c_str(), nullptr);
      (key == "eps" ? s.norm_eps : key == "rope_base" ? s.rope_base : s.rope_factor) = f;
      continue;
    }
    if (key == "arch") {
      s.arch = std::string(val);
      continue;
    }
    if (set_deepseek2_key(s, key, val)) continue;
    if (key == "tied") {
      s.tied_output = val == "1" || val == "true";
      continue;
    }
    int v = 0;
    auto r = std::from_chars(val.data(), val.data() + val.size(), v);
    if (r.ec != std::errc() || r.ptr != val.data() + val.size())
      throw std::invalid_argument(fmt::format("shape: {} = '{}' is not an integer", key, val));
    if (key == "dim")
      s.dim = v;
    else if (key == "layers")
      s.layers = v;
    else if (key == "heads")
      s.heads = v;
    else if (key == "kv_heads")
      s.kv_heads = v, kv_set = true;
    else if (key == "ffn")
      s.ffn = v;
    else if (key == "vocab")
      s.vocab = v;
    else if (key == "ctx")
      s.ctx = v;
    else if (key == "head_dim")
      s.head_dim_override = v;
    else if (key == "experts")
      s.experts = v;
    else if (key == "experts_used")
      s.experts_used = v;
    else if (key == "expert_ffn")
      s.expert_ffn = v;
    else if (key == "rope_orig_ctx")
      s.rope_orig_ctx = v;
    else if (key == "swa")
      s.swa = v;
    else
      throw std::invalid_argument(fmt::format(
          "shape: unknown key '{}' (dim, layers, heads, kv_heads, ffn, vocab, ctx, head_dim, "
          "experts, experts_used, expert_ffn, rope_base, rope_factor, rope_orig_ctx, swa, eps, "
          "tied, arch, and deepseek2's {})",
          key, deepseek2_key_names()));
  }
  // deepseek2's heads all read the one latent (its head_count_kv is written apart).
  if (!kv_set || s.arch == "deepseek2") s.kv_heads = s.heads;
  if (s.arch == "gpt-oss" && s.experts == 0)  // "tiny,arch=gpt-oss": a small router
    s.experts = 4, s.experts_used = 2, s.expert_ffn = s.ffn;
  if (s.arch == "gpt-oss" && s.swa == 0) s.swa = 16;
  validate_shape(s);
  return s;
}

GgmlType tensor_type_for(std::string_view quant, std::string_view name, int64_t ne0, int n_layers) {
  // Vectors stay f32, as llama.cpp's quantizer leaves them.
  if (ends_with(name, "_norm.weight") || ends_with(name, ".bias") || name == "rope_freqs.weight" ||
      ends_with(name, "ffn_gate_inp.weight") || ends_with(name, "attn_sinks.weight"))
    return GgmlType::F32;
  if (!find_quant(quant)) {
    std::vector<std::string_view> names;
    for (const auto& q : kQuants) names.push_back(q.name);
    throw std::invalid_argument(
        fmt::format("quant '{}': expected one of {}", quant, fmt::join(names, ", ")));
  }
  GgmlType t;
  if (quant == "mxfp4_moe") {
    t = ends_with(name, "_exps.weight") ? GgmlType::MXFP4 : GgmlType::Q8_0;
  } else if (quant == "q4_k_m" || quant == "q5_k_m") {
    t = quant == "q4_k_m" ? GgmlType::Q4_K : GgmlType::Q5_K;
    // llama.cpp's Q4_K_M (Q5_K_M alike): Q6_K for the output head, and for attn_v / ffn_down
    // of the first and last eighth of the layers and every third in between.
    if (name == "output.weight") t = GgmlType::Q6_K;
    const int i = layer_of(name), n = n_layers;
    const bool more_bits =
        i >= 0 && (n <= 0 || i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2);
    if (more_bits && (ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight") ||
                      ends_with(name, "ffn_down_exps.weight")))
      t = GgmlType::Q6_K;
  } else {
    auto tt = type_from_name(quant);
    if (!tt) throw std::logic_error(fmt::format("quant '{}' is listed but not a type", quant));
    t = *tt;
  }
  if (ne0 % traits(t).block_elems != 0) t = ne0 % 32 == 0 ? GgmlType::Q8_0 : GgmlType::F16;
  return t;
}

TensorFiller seeded_filler(uint64_t seed, const ModelShape& shape) {
  // token_embd: std 1 so the residual stream carries the token; tied heads use
  // 3/sqrt(dim) instead so logits keep a std of ~3. Matrices: std 1/sqrt(ne0),
  // the output head 3/sqrt(ne0), so logits are spread but not one-hot.
  const bool tied = shape.tied_output;
  return
      [seed, tied](std::string_view name, int64_t ne0, int64_t row0, int64_t n_rows, float* out) {
        const bool qk_norm =
            ends_with(name, "attn_q_norm.weight") || ends_with(name, "attn_k_norm.weight");
        if (ends_with(name, "_norm.weight") && !qk_norm) {
          std::fill(out, out + ne0 * n_rows, 1.0f);
          return;
        }
        float std_dev = 1.0f / std::sqrt(static_cast<float>(ne0));
        if (qk_norm || ends_with(name, ".bias")) std_dev = qk_norm ? 0.5f : 1.0f;
        // Sinks as large as the attention scores they compete with.
        if (ends_with(name, "attn_sinks.weight")) std_dev = 2.0f;
        if (name == "token_embd.weight") std_dev = tied ? 3.0f * std_dev : 1.0f;
        if (name == "output.weight") std_dev *= 3.0f;
        // A decisive router: the top experts' probabilities stand apart, so
        // which experts run (and with what weight) shapes every token.
        if (ends_with(name, "ffn_gate_inp.weight")) std_dev *= 3.0f;
        // Irwin-Hall: the sum of 4 uniforms minus 2 has variance 1/3.
        const float k = std_dev * std::sqrt(3.0f) / 65536.0f;
        const uint64_t h = fnv1a(name) ^ (seed * 0xD1B54A32D192ED03ull);
        for (int64_t r = 0; r < n_rows; ++r) {
          uint64_t s = h + static_cast<uint64_t>(row0 + r) * 0x9E3779B97F4A7C15ull;
          float* o = out + r * ne0;
          for (int64_t i = 0; i < ne0; ++i) {
            uint64_t z = splitmix64(s);
            float sum = float(z & 0xffff) + float((z >> 16) & 0xffff) + float((z >> 32) & 0xffff) +
                        float(z >> 48);
            o[i] = (sum - 131070.0f) * k + (qk_norm ? 1.0f : 0.0f);
          }
        }
      };
}

TensorFiller seeded_filler(uint64_t seed) {
  return seeded_filler(seed, ModelShape{});
}

namespace {

// The tokenizer: mkmodel's synthetic one, or a copy of another file's whose
// size must match the embedding's rows.
void write_vocab(gguf::Writer& w, const ModelShape& s, const WriteOptions& opts) {
  if (opts.vocab.copy_from.empty()) {
    write_synthetic_vocab(w, s.vocab, opts.seed);
    return;
  }
  auto src = gguf::File::open(opts.vocab.copy_from);
  const auto* toks = src->get_array("tokenizer.ggml.tokens");
  if (toks && static_cast<int>(toks->items.size()) != s.vocab)
    throw std::invalid_argument(fmt::format(
        "vocab copied from {} has {} tokens but the shape says vocab = {}: pass a shape "
        "with vocab={}",
        opts.vocab.copy_from.string(), toks->items.size(), s.vocab, toks->items.size()));
  copy_vocab(*src, w);
}

struct TensorDecl {
  std::string name;
  int64_t ne0, ne1;  // ne1 = 1 for vectors
  GgmlType type;
  int64_t ne2 = 1;  // experts stacked in one tensor
  int64_t rows() const { return ne1 * ne2; }
  // A vector is declared with one dimension, a matrix with two.
  std::vector<int64_t> dims() const {
    std::vector<int64_t> ne{ne0};
    if (ne1 > 1 || ne2 > 1) ne.push_back(ne1);
    if (ne2 > 1) ne.push_back(ne2);
    return ne;
  }
};

// Declarations in file order, each typed by the quant mix from its name, so
// that a layer's list reads as the architecture's tensor names.
struct TensorList {
  std::string_view quant;
  int layers;
  std::vector<TensorDecl> decls;
  void add(std::string name, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
    const GgmlType t = tensor_type_for(quant, name, ne0, layers);
    decls.push_back({std::move(name), ne0, ne1, t, ne2});
  }
};

// Layer i of llama, qwen2, qwen3, qwen3moe and gpt-oss (deepseek2's latent
// attention is in mkmodel_deepseek2.cpp).
void add_layer_tensors(TensorList& l, const ModelShape& s, int i) {
  const int64_t d = s.dim, q = s.q_dim(), kv = s.kv_dim(), f = s.ffn;
  const bool oss = s.arch == "gpt-oss";
  auto n = [i](const char* x) { return fmt::format("blk.{}.{}.weight", i, x); };
  auto bias = [i](const char* x) { return fmt::format("blk.{}.{}.bias", i, x); };
  l.add(n("attn_norm"), d, 1);
  l.add(n("attn_q"), d, q);
  l.add(n("attn_k"), d, kv);
  l.add(n("attn_v"), d, kv);
  if (s.arch == "qwen2" || oss) {
    l.add(bias("attn_q"), q, 1);
    l.add(bias("attn_k"), kv, 1);
    l.add(bias("attn_v"), kv, 1);
  }
  if (s.arch == "qwen3" || s.arch == "qwen3moe") {
    l.add(n("attn_q_norm"), s.head_dim(), 1);
    l.add(n("attn_k_norm"), s.head_dim(), 1);
  }
  l.add(n("attn_output"), q, d);
  if (oss) {
    l.add(bias("attn_output"), d, 1);
    l.add(n("attn_sinks"), s.heads, 1);
  }
  l.add(n(oss ? "post_attention_norm" : "ffn_norm"), d, 1);
  if (s.experts > 0) {
    const int64_t e = s.experts, fe = s.expert_ffn;
    l.add(n("ffn_gate_inp"), d, e);
    l.add(n("ffn_gate_exps"), d, fe, e);
    l.add(n("ffn_up_exps"), d, fe, e);
    l.add(n("ffn_down_exps"), fe, d, e);
    if (oss) {
      l.add(bias("ffn_gate_inp"), e, 1);
      l.add(bias("ffn_gate_exps"), fe, e);
      l.add(bias("ffn_up_exps"), fe, e);
      l.add(bias("ffn_down_exps"), d, e);
    }
    return;
  }
  l.add(n("ffn_gate"), d, f);
  l.add(n("ffn_up"), d, f);
  l.add(n("ffn_down"), f, d);
}

std::vector<TensorDecl> tensor_decls(const ModelShape& s, std::string_view quant) {
  TensorList l{quant, s.layers, {}};
  l.add("token_embd.weight", s.dim, s.vocab);
  l.add("output_norm.weight", s.dim, 1);
  if (!s.tied_output) l.add("output.weight", s.dim, s.vocab);
  if (s.rope_factor > 0 && s.arch == "llama") l.add("rope_freqs.weight", s.head_dim() / 2, 1);
  for (int i = 0; i < s.layers; ++i) {
    if (s.arch == "deepseek2")
      deepseek2_layer_tensors(s, i, [&](std::string name, int64_t ne0, int64_t ne1, int64_t ne2) {
        l.add(std::move(name), ne0, ne1, ne2);
      });
    else
      add_layer_tensors(l, s, i);
  }
  return std::move(l.decls);
}

// Tensor t's rows from fill, quantised into buf. Rows go kChunk to a work
// item so that a thread's f32 scratch stays small whatever the tensor; the
// filler's first exception is rethrown on the caller's thread, as the pool's
// workers cannot carry it.
void fill_tensor(runtime::ThreadPool& pool, const TensorDecl& t, const TensorFiller& fill,
                 bool fast_quant, std::vector<std::vector<float>>& scratch,
                 std::vector<uint8_t>& buf) {
  constexpr int64_t kChunk = 32;
  const size_t rb = row_size(t.type, t.ne0);
  const auto search = fast_quant ? kernels::QuantSearch::minmax : kernels::QuantSearch::ggml;
  std::exception_ptr err;
  std::mutex err_mu;
  pool.parallel_for((t.rows() + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e, int tid) {
    auto& tmp = scratch[tid];
    tmp.resize(size_t(kChunk) * t.ne0);
    for (int64_t c = b; c < e; ++c) {
      int64_t r0 = c * kChunk, n = std::min(kChunk, t.rows() - r0);
      try {
        fill(t.name, t.ne0, r0, n, tmp.data());
      } catch (...) {
        std::lock_guard lock(err_mu);
        err = std::current_exception();
        return;
      }
      for (int64_t r = 0; r < n; ++r)
        kernels::quantize_row(t.type, tmp.data() + r * t.ne0, buf.data() + (r0 + r) * rb, t.ne0,
                              search);
    }
  });
  if (err) std::rethrow_exception(err);
}

// One tensor at a time, so peak memory is one quantised tensor and a chunk of
// f32 rows per thread, whatever the model's size.
void write_tensor_data(gguf::Writer& w, const std::vector<TensorDecl>& decls, const ModelShape& s,
                       const WriteOptions& opts) {
  TensorFiller fill = opts.filler ? opts.filler : seeded_filler(opts.seed, s);
  if (s.arch == "deepseek2") fill = deepseek2_filler(s, fill);
  runtime::ThreadPool pool(runtime::first_cpus(opts.threads), false);
  std::vector<uint8_t> buf;
  std::vector<std::vector<float>> scratch(pool.size());
  for (size_t ti = 0; ti < decls.size(); ++ti) {
    const auto& t = decls[ti];
    if (opts.progress) opts.progress(t.name, static_cast<int>(ti), static_cast<int>(decls.size()));
    buf.resize(row_size(t.type, t.ne0) * t.rows());
    if (t.name == "rope_freqs.weight") {  // derived from the shape, not seeded
      const auto freqs = llama3_rope_freqs(s);
      std::memcpy(buf.data(), freqs.data(), buf.size());
    } else {
      fill_tensor(pool, t, fill, opts.fast_quant, scratch, buf);
    }
    w.write_tensor_data(t.name, buf);
  }
}

}  // namespace

void write_model(const std::filesystem::path& path, const ModelShape& shape,
                 const WriteOptions& opts) {
  validate_shape(shape);
  gguf::Writer w;
  write_hparams(w, shape, opts);
  for (const auto& [key, value] : opts.extra_u32) w.set_u32(key, value);
  write_vocab(w, shape, opts);
  const std::vector<TensorDecl> decls = tensor_decls(shape, opts.quant);
  for (const auto& t : decls) w.add_tensor(t.name, t.type, t.dims());
  w.begin(path);
  write_tensor_data(w, decls, shape, opts);
  w.finish();
}

void write_model(const std::filesystem::path& path, const ModelShape& shape, GgmlType quant,
                 uint64_t seed, const VocabSource& vocab) {
  WriteOptions o;
  o.quant = std::string(traits(quant).name);
  o.seed = seed;
  o.vocab = vocab;
  write_model(path, shape, o);
}

}  // namespace epyctune::engine
