#include "engine/model/llama_weights.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/runtime/progress.hpp"
#include "engine/runtime/shared_weights.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {
namespace {

bool is_matmul_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

struct Binder {
  const gguf::File& f;
  const LlamaConfig& cfg;
  std::set<std::string> used;  // every tensor bound, to reject the others

  [[noreturn]] void fail(const std::string& msg) const {
    throw std::runtime_error(fmt::format("{}: {}", f.path(), msg));
  }

  const gguf::TensorInfo& find(const std::string& name) {
    const auto* t = f.tensor(name);
    if (!t)
      fail(fmt::format("tensor '{}' is missing (a {} model with block_count = {} needs it)", name,
                       cfg.arch_name, cfg.n_layers));
    used.insert(name);
    return *t;
  }

  void check_shape(const gguf::TensorInfo& t, int64_t ne0, int64_t ne1, const char* what) const {
    int dims = 0;
    for (int i = 0; i < 4; ++i)
      if (t.ne[i] != 1) dims = i + 1;
    bool ok = t.ne[0] == ne0 && t.ne[1] == ne1 && t.ne[2] == 1 && t.ne[3] == 1;
    if (!ok)
      fail(fmt::format("tensor '{}': shape [{}, {}, {}, {}] (dims {}), expected [{}, {}] ({})",
                       t.name, t.ne[0], t.ne[1], t.ne[2], t.ne[3], dims, ne0, ne1, what));
  }

  Mat mat(const std::string& name, int64_t cols, int64_t rows, const char* what) {
    const auto& t = find(name);
    check_shape(t, cols, rows, what);
    return as_mat(t, cols, rows);
  }

  // n matrices of rows x cols stacked in one 3-D tensor [cols, rows, n] (the
  // experts), as one matrix of n * rows rows.
  Mat stacked(const std::string& name, int64_t cols, int64_t rows, int64_t n, const char* what) {
    const auto& t = find(name);
    if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != n || t.ne[3] != 1)
      fail(fmt::format("tensor '{}': shape [{}, {}, {}, {}], expected [{}, {}, {}] ({})", t.name,
                       t.ne[0], t.ne[1], t.ne[2], t.ne[3], cols, rows, n, what));
    return as_mat(t, cols, rows * n);
  }

  Mat as_mat(const gguf::TensorInfo& t, int64_t cols, int64_t rows) const {
    const std::string& name = t.name;
    if (!is_matmul_type(t.type))
      fail(fmt::format("tensor '{}': type {} cannot be used as a weight matrix", name,
                       traits(t.type).name));
    const auto& tr = traits(t.type);
    if (cols % tr.block_elems != 0)
      fail(fmt::format("tensor '{}': row length {} is not a multiple of the {} block ({})", name,
                       cols, tr.name, tr.block_elems));
    Mat m;
    m.name = name;
    m.type = t.type;
    m.data = t.data;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = row_size(t.type, cols);
    if (t.nbytes < m.bytes())
      fail(fmt::format("tensor '{}': {} bytes of data, {} expected", name, t.nbytes, m.bytes()));
    return m;
  }

  // A small 1-D tensor (norm weights, biases, rope factors), dequantized.
  std::vector<float> vec(const std::string& name, int64_t n, const char* what, uint64_t& bytes) {
    return vec2(name, n, 1, what, bytes);
  }
  // A small 2-D tensor (one bias row per expert), dequantized, row-major.
  std::vector<float> vec2(const std::string& name, int64_t ne0, int64_t ne1, const char* what,
                          uint64_t& bytes) {
    const int64_t n = ne0 * ne1;
    const auto& t = find(name);
    check_shape(t, ne0, ne1, what);
    if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
      fail(fmt::format("tensor '{}': must be f32, f16 or bf16, found {}", name,
                       traits(t.type).name));
    std::vector<float> out(n);
    kernels::dequantize_row(t.type, t.data, out.data(), n);
    bytes += t.nbytes;
    return out;
  }
  std::vector<float> norm(const std::string& name, uint64_t& bytes) {
    return vec(name, cfg.dim, "embedding_length", bytes);
  }

  // Tensors nothing bound would be silently ignored: an error instead.
  void check_all_used() const {
    for (const auto& t : f.tensors())
      if (!used.count(t.name))
        fail(
            fmt::format("tensor '{}' is not used by a {} model: the engine does not implement it "
                        "(supported: token_embd, output_norm, output, rope_freqs and blk.N.{{{}}})",
                        t.name, cfg.arch_name, layer_tensor_names(cfg)));
  }

  static std::string layer_tensor_names(const LlamaConfig& c) {
    if (c.arch == Arch::deepseek2)
      return "attn_norm, attn_q or attn_q_a + attn_q_a_norm + attn_q_b, attn_kv_a_mqa, "
             "attn_kv_a_norm, attn_kv_b or attn_k_b + attn_v_b, attn_output, ffn_norm, "
             "ffn_gate, ffn_up, ffn_down (leading dense layers), ffn_gate_inp, exp_probs_b.bias, "
             "ffn_{gate,up,down}_exps, ffn_{gate,up,down}_shexp";
    std::string s = "attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm";
    if (c.attn_qkv_bias) s += ", attn_q.bias, attn_k.bias, attn_v.bias";
    if (c.attn_qk_norm) s += ", attn_q_norm, attn_k_norm";
    if (c.attn_out_bias) s += ", attn_output.bias";
    if (c.attn_sinks) s += ", attn_sinks";
    if (c.arch == Arch::gpt_oss) s += ", post_attention_norm (not ffn_norm)";
    if (c.moe_biases) s += ", ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias";
    s +=
        c.n_expert > 0 ? ", ffn_gate_inp, ffn_{gate,up,down}_exps" : ", ffn_gate, ffn_up, ffn_down";
    return s;
  }
};

// attn_k_b ([qk_nope, kv_lora_rank, n_heads]: per head, kv_lora_rank rows
// of qk_nope) as one f32 matrix of n_heads * qk_nope rows of kv_lora_rank,
// so that k_nope = wk_b_t * latent is an ordinary matmul.
void transpose_k_b(const Mat& kb, const LlamaConfig& c, MlaLayerWeights& m) {
  const int H = c.n_heads, nope = c.mla.qk_nope, r = c.mla.kv_lora_rank;
  m.k_b_t.assign(size_t(H) * nope * r, 0.0f);
  std::vector<float> row(nope);
  for (int h = 0; h < H; ++h)
    for (int j = 0; j < r; ++j) {
      kernels::dequantize_row(kb.type, kb.data + (size_t(h) * r + j) * kb.row_bytes, row.data(),
                              nope);
      for (int d = 0; d < nope; ++d) m.k_b_t[(size_t(h) * nope + d) * r + j] = row[d];
    }
  m.wk_b_t.name = kb.name + " (transposed)";
  m.wk_b_t.type = GgmlType::F32;
  m.wk_b_t.data = reinterpret_cast<const uint8_t*>(m.k_b_t.data());
  m.wk_b_t.rows = int64_t(H) * nope;
  m.wk_b_t.cols = r;
  m.wk_b_t.row_bytes = sizeof(float) * size_t(r);
}

void bind_mla(Binder& b, int i, LayerWeights& l, uint64_t& nb) {
  const LlamaConfig& c = b.cfg;
  const auto& a = c.mla;
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}.weight", i, s); };
  const int64_t H = c.n_heads, qk = c.head_dim, r = a.kv_lora_rank;
  l.attn_norm = b.norm(n("attn_norm"), nb);
  auto& m = l.mla;
  if (a.q_lora_rank > 0) {
    m.wq_a = b.mat(n("attn_q_a"), c.dim, a.q_lora_rank, "embedding_length x q_lora_rank");
    m.q_a_norm = b.vec(n("attn_q_a_norm"), a.q_lora_rank, "q_lora_rank", nb);
    m.wq_b = b.mat(n("attn_q_b"), a.q_lora_rank, H * qk, "q_lora_rank x head_count*key_length");
  } else {
    l.wq = b.mat(n("attn_q"), c.dim, H * qk, "embedding_length x head_count*key_length");
  }
  m.wkv_a = b.mat(n("attn_kv_a_mqa"), c.dim, r + c.n_rot,
                  "embedding_length x kv_lora_rank+rope.dimension_count");
  m.kv_a_norm = b.vec(n("attn_kv_a_norm"), r, "kv_lora_rank", nb);
  if (a.split_kv_b) {
    const Mat kb = b.stacked(n("attn_k_b"), a.qk_nope, r, H, "qk_nope x kv_lora_rank x head_count");
    transpose_k_b(kb, c, m);
    m.wv_b = b.stacked(n("attn_v_b"), r, a.v_head_dim, H,
                       "kv_lora_rank x value_length_mla x head_count");
  } else {
    m.wkv_b = b.mat(n("attn_kv_b"), r, H * (a.qk_nope + a.v_head_dim),
                    "kv_lora_rank x head_count*(qk_nope+value_length)");
  }
  l.wo = b.mat(n("attn_output"), H * a.v_head_dim, c.dim,
               "head_count*value_length x embedding_length");
}

void bind_attention(Binder& b, int i, LayerWeights& l, uint64_t& nb) {
  const LlamaConfig& c = b.cfg;
  if (c.mla.kv_lora_rank > 0) return bind_mla(b, i, l, nb);
  auto n = [i](const char* s, const char* kind = "weight") {
    return fmt::format("blk.{}.{}.{}", i, s, kind);
  };
  l.attn_norm = b.norm(n("attn_norm"), nb);
  l.wq = b.mat(n("attn_q"), c.dim, c.q_dim(), "embedding_length x head_count*head_dim");
  l.wk = b.mat(n("attn_k"), c.dim, c.kv_dim(), "embedding_length x head_count_kv*head_dim");
  l.wv = b.mat(n("attn_v"), c.dim, c.kv_dim(), "embedding_length x head_count_kv*head_dim");
  l.wo = b.mat(n("attn_output"), c.q_dim(), c.dim, "head_count*head_dim x embedding_length");
  if (c.attn_qkv_bias) {
    l.bq = b.vec(n("attn_q", "bias"), c.q_dim(), "head_count*head_dim", nb);
    l.bk = b.vec(n("attn_k", "bias"), c.kv_dim(), "head_count_kv*head_dim", nb);
    l.bv = b.vec(n("attn_v", "bias"), c.kv_dim(), "head_count_kv*head_dim", nb);
  }
  if (c.attn_qk_norm) {
    l.q_norm = b.vec(n("attn_q_norm"), c.head_dim, "key_length", nb);
    l.k_norm = b.vec(n("attn_k_norm"), c.head_dim, "key_length", nb);
  }
  if (c.attn_out_bias) l.bo = b.vec(n("attn_output", "bias"), c.dim, "embedding_length", nb);
  if (c.attn_sinks) {
    l.sinks = b.vec(n("attn_sinks"), c.n_heads, "head_count", nb);
    for (float v : l.sinks)
      if (std::isnan(v)) b.fail(fmt::format("tensor '{}': a sink is NaN", n("attn_sinks")));
  }
}

void bind_moe_biases(Binder& b, int i, MoeLayerWeights& m, uint64_t& nb) {
  const LlamaConfig& c = b.cfg;
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}.bias", i, s); };
  const int ne = c.n_expert, F = c.expert_ffn_dim;
  m.router_b = b.vec(n("ffn_gate_inp"), ne, "expert_count", nb);
  m.gate_b = b.vec2(n("ffn_gate_exps"), F, ne, "expert_feed_forward_length x expert_count", nb);
  m.up_b = b.vec2(n("ffn_up_exps"), F, ne, "expert_feed_forward_length x expert_count", nb);
  m.down_b = b.vec2(n("ffn_down_exps"), c.dim, ne, "embedding_length x expert_count", nb);
}

void bind_ffn(Binder& b, int i, LayerWeights& l, uint64_t& nb) {
  const LlamaConfig& c = b.cfg;
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}.weight", i, s); };
  // gpt-oss names the FFN's input norm after the attention block it follows.
  l.ffn_norm = b.norm(n(c.arch == Arch::gpt_oss ? "post_attention_norm" : "ffn_norm"), nb);
  l.ffn_kind = c.ffn_kind(i);
  if (l.ffn_kind == FfnKind::moe) {
    const int ne = c.n_expert, F = c.expert_ffn_dim;
    auto& m = l.moe;
    m.router = b.mat(n("ffn_gate_inp"), c.dim, ne, "embedding_length x expert_count");
    m.gate_exps = b.stacked(n("ffn_gate_exps"), c.dim, F, ne,
                            "embedding_length x expert_feed_forward_length x expert_count");
    m.up_exps = b.stacked(n("ffn_up_exps"), c.dim, F, ne,
                          "embedding_length x expert_feed_forward_length x expert_count");
    m.down_exps = b.stacked(n("ffn_down_exps"), F, c.dim, ne,
                            "expert_feed_forward_length x embedding_length x expert_count");
    if (c.moe_biases) bind_moe_biases(b, i, m, nb);
    if (c.arch != Arch::deepseek2) return;
    const std::string bias = fmt::format("blk.{}.exp_probs_b.bias", i);
    if (b.f.tensor(bias)) m.probs_bias = b.vec(bias, ne, "expert_count", nb);
    if (c.n_expert_shared > 0) {
      const int64_t S = int64_t(F) * c.n_expert_shared;
      const char* what = "embedding_length x expert_feed_forward_length*expert_shared_count";
      m.gate_shexp = b.mat(n("ffn_gate_shexp"), c.dim, S, what);
      m.up_shexp = b.mat(n("ffn_up_shexp"), c.dim, S, what);
      m.down_shexp = b.mat(n("ffn_down_shexp"), S, c.dim,
                           "expert_feed_forward_length*expert_shared_count x embedding_length");
    }
    return;
  }
  l.w_gate = b.mat(n("ffn_gate"), c.dim, c.ffn_dim, "embedding_length x feed_forward_length");
  l.w_up = b.mat(n("ffn_up"), c.dim, c.ffn_dim, "embedding_length x feed_forward_length");
  l.w_down = b.mat(n("ffn_down"), c.ffn_dim, c.dim, "feed_forward_length x embedding_length");
}

}  // namespace

std::vector<Mat*> LayerWeights::matrices() {
  std::vector<Mat*> out{&wq, &wk, &wv, &wo};
  if (ffn_kind == FfnKind::dense)
    for (Mat* m : {&w_gate, &w_up, &w_down}) out.push_back(m);
  else
    for (Mat* m : {&moe.router, &moe.gate_exps, &moe.up_exps, &moe.down_exps}) out.push_back(m);
  // deepseek2's (wk_b_t is made at load, not read from the file: not copied).
  for (Mat* m : {&mla.wq_a, &mla.wq_b, &mla.wkv_a, &mla.wkv_b, &mla.wv_b, &moe.gate_shexp,
                 &moe.up_shexp, &moe.down_shexp})
    out.push_back(m);
  // Tensors this architecture does not have.
  std::erase_if(out, [](const Mat* m) { return m->rows == 0; });
  return out;
}

std::vector<const Mat*> LayerWeights::matrices() const {
  std::vector<const Mat*> out;
  for (Mat* m : const_cast<LayerWeights*>(this)->matrices()) out.push_back(m);
  return out;
}

std::vector<Mat*> LlamaWeights::matrices() {
  std::vector<Mat*> out{&tok_embd};
  for (auto& l : layers)
    for (Mat* m : l.matrices()) out.push_back(m);
  if (!tied_output) out.push_back(&output);
  return out;
}

LlamaWeights bind_weights(const gguf::File& f, const LlamaConfig& c) {
  Binder b{f, c, {}};
  LlamaWeights w;
  w.tok_embd = b.mat("token_embd.weight", c.dim, c.n_vocab, "embedding_length x vocab");
  w.output_norm = b.norm("output_norm.weight", w.norm_bytes);
  if (f.tensor("output.weight")) {
    w.output = b.mat("output.weight", c.dim, c.n_vocab, "embedding_length x vocab");
  } else {
    w.output = w.tok_embd;
    w.tied_output = true;
  }
  if (c.rope_scaling == RopeScaling::llama3)
    w.rope_freqs =
        b.vec("rope_freqs.weight", c.n_rot / 2, "rope.dimension_count / 2", w.norm_bytes);
  for (float v : w.rope_freqs)
    if (!(v > 0) || !std::isfinite(v))
      b.fail(fmt::format("tensor 'rope_freqs.weight': factor {} is not a positive number", v));
  w.layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    bind_attention(b, i, w.layers[i], w.norm_bytes);
    bind_ffn(b, i, w.layers[i], w.norm_bytes);
  }
  b.check_all_used();
  return w;
}

namespace {

constexpr size_t kExtent = size_t{2} << 20;
// The version of the weight image's layout (extents, alignment, packed16
// format): bump it when the bytes of a copy change for the same inputs.
constexpr int kImageVersion = 1;

size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// Where each matrix goes in the copy. Groups: 0 = token_embd (+ output),
// 1..n_layers = layer i-1; each group starts its own 2 MiB extent, so a NUMA
// policy can place it on its own.
struct CopyLayout {
  struct Item {
    Mat* m;
    int group;
    size_t offset;
  };
  std::vector<Item> items;
  std::vector<std::pair<size_t, size_t>> extent;  // [begin, end) per group
  size_t bytes = 0;
};

CopyLayout layout_copy(LlamaWeights& w) {
  constexpr size_t kAlign = 64;
  const int n_layers = static_cast<int>(w.layers.size());
  CopyLayout L;
  L.items.push_back({&w.tok_embd, 0, 0});
  if (!w.tied_output) L.items.push_back({&w.output, 0, 0});
  for (int i = 0; i < n_layers; ++i) {
    for (Mat* m : w.layers[i].matrices()) L.items.push_back({m, i + 1, 0});
  }
  L.extent.resize(n_layers + 1);
  size_t off = 0;
  int cur = -1;
  for (auto& it : L.items) {
    if (it.group != cur) {
      if (cur >= 0) L.extent[cur].second = off;
      off = round_up(off, kExtent);
      L.extent[it.group].first = off;
      cur = it.group;
    }
    off = round_up(off, kAlign);
    it.offset = off;
    off += it.m->bytes();
  }
  L.extent[cur].second = off;
  L.bytes = off;
  return L;
}

// The nodes a policy places on: the given ones, else the pool's (local) or
// every node with memory; none for NumaPolicy::none.
std::vector<int> resolve_nodes(const CopyOptions& opts, const runtime::ThreadPool& pool) {
  if (opts.policy == runtime::NumaPolicy::none) return {};
  if (!opts.nodes.empty()) return opts.nodes;
  return opts.policy == runtime::NumaPolicy::local ? runtime::nodes_of_cpus(pool.cpus())
                                                   : runtime::memory_nodes();
}

// mbinds each group's extent of the untouched copy at `base` (map_len bytes,
// `page` bytes a page) per the policy; a failure is noted and leaves
// placement to the kernel.
void bind_extents(uint8_t* base, size_t map_len, size_t page, const CopyLayout& L,
                  const CopyOptions& opts, const std::vector<int>& nodes, std::string& note) {
  if (opts.policy == runtime::NumaPolicy::none) return;
  const int n_layers = static_cast<int>(L.extent.size()) - 1;
  for (int g = 0; g <= n_layers; ++g) {
    std::vector<int> gn = nodes;
    if (opts.policy == runtime::NumaPolicy::split && g > 0)
      gn = {nodes[static_cast<size_t>(g - 1) * nodes.size() / n_layers]};
    std::string err;
    if (!runtime::bind_pages(base, map_len, page, L.extent[g].first,
                             L.extent[g].second - L.extent[g].first, opts.policy, gn, err)) {
      note += (note.empty() ? "" : "; ") + err + " (placement left to the kernel)";
      break;
    }
  }
}

// Which matrices are repacked (packed16) and how many bytes that is. An
// untied embedding table is only looked up by row: ggml's layout. A tied one
// is also the output head, the largest matmul of a small model, and reads
// several times slower at one token as ggml rows; it is packed, and lookups
// unpack the row's panel.
uint64_t choose_layouts(LlamaWeights& w, const CopyLayout& L, const CopyOptions& opts) {
  // An expert is read as its own row range, which must start a 16-row panel.
  std::set<const Mat*> unpackable;
  for (const auto& l : w.layers)
    if (l.ffn_kind == FfnKind::moe)
      for (const Mat* m : {&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps})
        if (m->rows / std::max<int64_t>(1, l.moe.router.rows) % 16 != 0) unpackable.insert(m);
  uint64_t packed = 0;
  for (const auto& it : L.items) {
    Mat& m = *it.m;
    const bool matmul = (&m != &w.tok_embd || w.tied_output) && !unpackable.count(&m);
    if (opts.pack && matmul && kernels::packed_layout_pays(m.type)) {
      m.layout = kernels::WeightLayout::packed16;
      packed += m.bytes();
    }
  }
  return packed;
}

struct CopyPiece {
  const uint8_t* src;
  uint8_t* dst;
  size_t n;
  const Mat* pack;  // repack these rows after the copy (null: keep ggml's layout)
};

// Pieces of whole rows (about 2 MiB) spread over the pool: parallel page
// faults and reads, and each piece is repacked while it is in cache.
std::vector<CopyPiece> plan_pieces(const CopyLayout& L, uint8_t* base) {
  std::vector<CopyPiece> pieces;
  for (const auto& it : L.items) {
    const Mat& m = *it.m;
    const bool pack = m.layout == kernels::WeightLayout::packed16;
    const uint8_t* src = m.data;
    uint8_t* dst = base + it.offset;
    // Whole 16-row panels per piece: packed matrices interleave them.
    const size_t step = std::max<size_t>(16, kExtent / m.row_bytes / 16 * 16) * m.row_bytes;
    for (size_t o = 0; o < m.bytes(); o += step)
      pieces.push_back({src + o, dst + o, std::min(step, m.bytes() - o), pack ? &m : nullptr});
  }
  return pieces;
}

// Data is pread() from the file (no page faults on its mapping), or copied
// from the mapping when that fails.
void copy_piece(const CopyPiece& p, int fd, const uint8_t* file_base) {
  size_t done = 0;
  if (fd >= 0) {
    auto off = static_cast<off_t>(p.src - file_base);
    while (done < p.n) {
      ssize_t n = ::pread(fd, p.dst + done, p.n - done, off + static_cast<off_t>(done));
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  if (done < p.n) std::memcpy(p.dst + done, p.src + done, p.n - done);
  if (p.pack)
    kernels::pack_rows(p.pack->type, p.dst, p.pack->row_bytes,
                       static_cast<int64_t>(p.n / p.pack->row_bytes), p.pack->cols);
}

// Writes every matrix (still pointing into the file) into the copy at base.
void copy_all(const gguf::File& f, const CopyLayout& L, uint8_t* base, const CopyOptions& opts,
              runtime::ThreadPool& pool) {
  const std::vector<CopyPiece> pieces = plan_pieces(L, base);
  const uint8_t* file_base = f.bytes().data();
  int fd = ::open(f.path().c_str(), O_RDONLY | O_CLOEXEC);
  runtime::parallel_for_progress(
      pool, static_cast<int64_t>(pieces.size()), [&](int64_t i) { return pieces[i].n; }, "copy",
      opts.progress,
      [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) copy_piece(pieces[i], fd, file_base);
      });
  if (fd >= 0) ::close(fd);
}

// Everything that changes the bytes of the copy (or where its pages are), as
// text: the store file's key. The model file by identity and by a hash of its
// header and tensor table; the layout (offsets, types, shapes, packed or
// not) by a hash; the ISA, which decides what is packed; the NUMA placement.
std::string store_key(const gguf::File& f, const CopyLayout& L, const CopyOptions& opts,
                      const std::vector<int>& nodes) {
  struct stat st {};
  if (::stat(f.path().c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("{}: cannot stat: {}", f.path(), std::strerror(errno)));
  const auto bytes = f.bytes();
  const auto header = bytes.first(std::min(f.data_offset(), bytes.size()));
  std::string layout;
  for (const auto& it : L.items)
    layout +=
        fmt::format("{} {} {} {} {} {} {}\n", it.m->name, static_cast<int>(it.m->type), it.m->rows,
                    it.m->cols, it.m->row_bytes, it.offset, static_cast<int>(it.m->layout));
  std::string node_list;
  for (int n : nodes) node_list += (node_list.empty() ? "" : ",") + std::to_string(n);
  return fmt::format(
      "epyctune weight image {}\nmodel.dev={}\nmodel.ino={}\nmodel.size={}\nmodel.mtime_ns={}\n"
      "model.header_bytes={}\nmodel.header_hash={:016x}\nisa={}\npack={}\nnuma.policy={}\n"
      "numa.nodes={}\nlayout.bytes={}\nlayout.hash={:016x}\n",
      kImageVersion, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
      static_cast<uint64_t>(st.st_size),
      static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
          static_cast<uint64_t>(st.st_mtim.tv_nsec),
      header.size(), runtime::hash64(header), kernels::isa_name(kernels::active_isa()),
      opts.pack ? 1 : 0, runtime::numa_policy_name(opts.policy), node_list, L.bytes,
      runtime::hash64(layout));
}

}  // namespace

CopyResult copy_weights(const gguf::File& f, LlamaWeights& w, const CopyOptions& opts,
                        runtime::ThreadPool& pool) {
  const CopyLayout L = layout_copy(w);
  CopyResult r;
  r.packed_bytes = choose_layouts(w, L, opts);
  const std::vector<int> nodes = resolve_nodes(opts, pool);
  const uint8_t* base = nullptr;
  if (opts.shared_dir.empty()) {
    r.memory = runtime::WeightMemory::allocate(L.bytes, opts.hugepages);
    r.note = r.memory.fallback_reason();
    const size_t page = r.memory.kind() == runtime::PageKind::hugetlb ? kExtent : 4096;
    bind_extents(r.memory.data(), r.memory.size(), page, L, opts, nodes, r.note);
    copy_all(f, L, r.memory.data(), opts, pool);
    base = r.memory.data();
  } else {
    runtime::SharedWeightsRequest req;
    req.dir = opts.shared_dir;
    req.key = store_key(f, L, opts, nodes);
    req.data_bytes = L.bytes;
    req.policy = opts.policy;
    req.nodes = nodes;
    req.place = [&](uint8_t* data, size_t page) {
      bind_extents(data, round_up(L.bytes, page), page, L, opts, nodes, r.note);
    };
    req.fill = [&](uint8_t* data) { copy_all(f, L, data, opts, pool); };
    auto s = runtime::open_shared_weights(req);
    r.memory = std::move(s.memory);
    base = s.data;
    r.shared = std::move(s.info);
    if (!r.shared.note.empty()) r.note += (r.note.empty() ? "" : "; ") + r.shared.note;
    if (opts.hugepages && r.shared.fs != "hugetlbfs")
      r.note += std::string(r.note.empty() ? "" : "; ") +
                "hugepages asked for, but the shared store's pages are its file system's: put "
                "the store on a hugetlbfs mount for huge pages";
  }
  for (const auto& it : L.items) it.m->data = base + it.offset;
  if (w.tied_output) {
    w.output.data = w.tok_embd.data;
    w.output.layout = w.tok_embd.layout;
  }
  return r;
}

}  // namespace epyctune::engine
