#include "engine/synth/mkmodel.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/synth/gguf_writer.hpp"
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

// llama.cpp's llama_ftype numbers for general.file_type.
uint32_t file_type_of(std::string_view quant) {
  if (quant == "f32") return 0;
  if (quant == "f16") return 1;
  if (quant == "q4_0") return 2;
  if (quant == "q8_0") return 7;
  if (quant == "q4_k") return 14;  // MOSTLY_Q4_K_S: all Q4_K
  if (quant == "q4_k_m") return 15;
  if (quant == "q6_k") return 18;
  if (quant == "bf16") return 32;
  return 0;
}

ModelShape preset(std::string_view name) {
  ModelShape s;
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
  } else {
    throw std::invalid_argument(fmt::format("unknown shape preset '{}'", name));
  }
  return s;
}

}  // namespace

uint64_t ModelShape::n_params() const {
  uint64_t d = dim, kv = uint64_t(kv_heads) * head_dim();
  uint64_t per_layer = d * d * 2 + d * kv * 2 + d * uint64_t(ffn) * 3 + 2 * d;
  return uint64_t(vocab) * d * (tied_output ? 1 : 2) + d + per_layer * layers;
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
  if (s.dim % s.heads) bad(fmt::format("dim {} is not a multiple of heads {}", s.dim, s.heads));
  if (s.heads % s.kv_heads)
    bad(fmt::format("kv_heads {} does not divide heads {}", s.kv_heads, s.heads));
  if (s.head_dim() % 2) bad(fmt::format("head dim {} is odd (RoPE rotates pairs)", s.head_dim()));
  if (s.dim % 32 || s.ffn % 32)
    bad(fmt::format("dim {} and ffn {} must be multiples of 32 (quant block)", s.dim, s.ffn));
  if (s.vocab < 259) bad(fmt::format("vocab {} < 259 (3 specials + 256 byte tokens)", s.vocab));
}

ModelShape parse_shape(std::string_view spec) {
  if (spec.find('=') == std::string_view::npos) return preset(spec);
  ModelShape s = preset("tiny");
  s.name = std::string(spec);
  bool kv_set = false;
  while (!spec.empty()) {
    auto comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument(fmt::format("shape: '{}' is not key=value", item));
    std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "rope_base" || key == "eps") {
      float f = std::strtof(std::string(val).c_str(), nullptr);
      (key == "eps" ? s.norm_eps : s.rope_base) = f;
      continue;
    }
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
    else
      throw std::invalid_argument(fmt::format(
          "shape: unknown key '{}' (dim, layers, heads, kv_heads, ffn, vocab, ctx, rope_base, "
          "eps, tied)",
          key));
  }
  if (!kv_set) s.kv_heads = s.heads;
  validate_shape(s);
  return s;
}

GgmlType tensor_type_for(std::string_view quant, std::string_view name, int64_t ne0, int n_layers) {
  if (ends_with(name, "_norm.weight")) return GgmlType::F32;
  GgmlType t;
  if (quant == "q4_k_m") {
    t = GgmlType::Q4_K;
    // llama.cpp's Q4_K_M: Q6_K for the output head, and for attn_v / ffn_down
    // of the first and last eighth of the layers and every third in between.
    if (name == "output.weight") t = GgmlType::Q6_K;
    const int i = layer_of(name), n = n_layers;
    const bool more_bits =
        i >= 0 && (n <= 0 || i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2);
    if (more_bits && (ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight")))
      t = GgmlType::Q6_K;
  } else {
    auto tt = type_from_name(quant);
    if (!tt || *tt == GgmlType::Q8_K)
      throw std::invalid_argument(fmt::format(
          "quant '{}': expected f32, f16, bf16, q8_0, q4_0, q4_k, q6_k or q4_k_m", quant));
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
        if (ends_with(name, "_norm.weight")) {
          std::fill(out, out + ne0 * n_rows, 1.0f);
          return;
        }
        float std_dev = 1.0f / std::sqrt(static_cast<float>(ne0));
        if (name == "token_embd.weight") std_dev = tied ? 3.0f * std_dev : 1.0f;
        if (name == "output.weight") std_dev *= 3.0f;
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
            o[i] = (sum - 131070.0f) * k;
          }
        }
      };
}

TensorFiller seeded_filler(uint64_t seed) {
  return seeded_filler(seed, ModelShape{});
}

void write_model(const std::filesystem::path& path, const ModelShape& shape,
                 const WriteOptions& opts) {
  validate_shape(shape);
  const ModelShape& s = shape;
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name",
               opts.general_name.empty() ? "epyctune-synthetic-" + s.name : opts.general_name);
  w.set_u32("general.file_type", file_type_of(opts.quant));
  w.set_u32("general.quantization_version", 2);
  w.set_u32("llama.context_length", s.ctx);
  w.set_u32("llama.embedding_length", s.dim);
  w.set_u32("llama.block_count", s.layers);
  w.set_u32("llama.feed_forward_length", s.ffn);
  w.set_u32("llama.attention.head_count", s.heads);
  w.set_u32("llama.attention.head_count_kv", s.kv_heads);
  for (const auto& [key, value] : opts.extra_u32) w.set_u32(key, value);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", s.norm_eps);
  w.set_f32("llama.rope.freq_base", s.rope_base);
  w.set_u32("llama.rope.dimension_count", s.head_dim());
  w.set_u32("llama.vocab_size", s.vocab);
  if (opts.vocab.copy_from.empty()) {
    write_synthetic_vocab(w, s.vocab, opts.seed);
  } else {
    auto src = gguf::File::open(opts.vocab.copy_from);
    const auto* toks = src->get_array("tokenizer.ggml.tokens");
    if (toks && static_cast<int>(toks->items.size()) != s.vocab)
      throw std::invalid_argument(fmt::format(
          "vocab copied from {} has {} tokens but the shape says vocab = {}: pass a shape "
          "with vocab={}",
          opts.vocab.copy_from.string(), toks->items.size(), s.vocab, toks->items.size()));
    copy_vocab(*src, w);
  }

  struct Decl {
    std::string name;
    int64_t ne0, ne1;  // ne1 = 1 for vectors
    GgmlType type;
  };
  std::vector<Decl> decls;
  auto add = [&](std::string name, int64_t ne0, int64_t ne1) {
    GgmlType t = tensor_type_for(opts.quant, name, ne0, s.layers);
    decls.push_back({std::move(name), ne0, ne1, t});
  };
  const int64_t d = s.dim, kv = int64_t(s.kv_heads) * s.head_dim(), f = s.ffn;
  add("token_embd.weight", d, s.vocab);
  add("output_norm.weight", d, 1);
  if (!s.tied_output) add("output.weight", d, s.vocab);
  for (int i = 0; i < s.layers; ++i) {
    auto n = [i](const char* x) { return fmt::format("blk.{}.{}.weight", i, x); };
    add(n("attn_norm"), d, 1);
    add(n("attn_q"), d, d);
    add(n("attn_k"), d, kv);
    add(n("attn_v"), d, kv);
    add(n("attn_output"), d, d);
    add(n("ffn_norm"), d, 1);
    add(n("ffn_gate"), d, f);
    add(n("ffn_up"), d, f);
    add(n("ffn_down"), f, d);
  }
  for (const auto& t : decls) {
    std::vector<int64_t> ne{t.ne0};
    if (t.ne1 > 1 || !ends_with(t.name, "_norm.weight")) ne.push_back(t.ne1);
    w.add_tensor(t.name, t.type, ne);
  }
  w.begin(path);

  TensorFiller fill = opts.filler ? opts.filler : seeded_filler(opts.seed, s);
  runtime::ThreadPool pool(runtime::first_cpus(opts.threads), false);
  std::vector<uint8_t> buf;
  std::vector<std::vector<float>> rows_f32(pool.size());
  constexpr int64_t kChunk = 32;  // rows generated + quantised per work item
  for (size_t ti = 0; ti < decls.size(); ++ti) {
    const auto& t = decls[ti];
    if (opts.progress) opts.progress(t.name, static_cast<int>(ti), static_cast<int>(decls.size()));
    const size_t rb = row_size(t.type, t.ne0);
    buf.resize(rb * t.ne1);
    std::exception_ptr err;
    std::mutex err_mu;
    pool.parallel_for((t.ne1 + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e, int tid) {
      auto& tmp = rows_f32[tid];
      tmp.resize(size_t(kChunk) * t.ne0);
      for (int64_t c = b; c < e; ++c) {
        int64_t r0 = c * kChunk, n = std::min(kChunk, t.ne1 - r0);
        try {
          fill(t.name, t.ne0, r0, n, tmp.data());
        } catch (...) {
          std::lock_guard lock(err_mu);
          err = std::current_exception();
          return;
        }
        for (int64_t r = 0; r < n; ++r)
          kernels::quantize_row(
              t.type, tmp.data() + r * t.ne0, buf.data() + (r0 + r) * rb, t.ne0,
              opts.fast_quant ? kernels::QuantSearch::minmax : kernels::QuantSearch::ggml);
      }
    });
    if (err) std::rethrow_exception(err);
    w.write_tensor_data(t.name, buf);
  }
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
