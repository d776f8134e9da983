#include "engine/model/llama_model.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/llama_weights.hpp"
#include "engine/runtime/numa_maps.hpp"
#include "engine/runtime/progress.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One weight matrix applied to prepared activations, writing y[t * ldy + r].
struct MatJob {
  const Mat* m;
  const kernels::Acts* acts;
  float* y;
  int64_t ldy;
};

// Touches one byte per 4 KiB page of every matrix, 2 MiB per work item, so
// page faults (and disk reads for a cold file) happen on all pool threads.
void prefault_weights(LlamaWeights& w, runtime::ThreadPool& pool,
                      const runtime::ProgressFn& progress) {
  constexpr size_t kPiece = size_t{2} << 20;
  struct Piece {
    const uint8_t* p;
    size_t n;
  };
  std::vector<Piece> pieces;
  for (Mat* m : w.matrices()) {
    // Read-ahead hint for the file mapping (harmless on a copy).
    auto addr = reinterpret_cast<uintptr_t>(m->data);
    auto page = addr & ~uintptr_t{4095};
    madvise(reinterpret_cast<void*>(page), m->bytes() + (addr - page), MADV_WILLNEED);
    for (size_t o = 0; o < m->bytes(); o += kPiece)
      pieces.push_back({m->data + o, std::min(kPiece, m->bytes() - o)});
  }
  std::vector<uint64_t> sums(size_t(pool.size()) * 8, 0);
  runtime::parallel_for_progress(
      pool, static_cast<int64_t>(pieces.size()), [&](int64_t i) { return pieces[i].n; }, "page-in",
      progress,
      [&](int64_t b, int64_t e, int tid) {
        uint64_t s = 0;
        for (int64_t i = b; i < e; ++i) {
#ifdef MADV_POPULATE_READ
          // One syscall maps the whole piece (Linux >= 5.14), far cheaper than
          // a fault per 4 KiB page; older kernels answer EINVAL and we touch pages.
          auto addr = reinterpret_cast<uintptr_t>(pieces[i].p);
          auto page = addr & ~uintptr_t{4095};
          if (madvise(reinterpret_cast<void*>(page), pieces[i].n + (addr - page),
                      MADV_POPULATE_READ) == 0)
            continue;
#endif
          for (size_t o = 0; o < pieces[i].n; o += 4096)
            s += *static_cast<const volatile uint8_t*>(pieces[i].p + o);
        }
        sums[size_t(tid) * 8] += s;
      });
}

}  // namespace

struct LlamaModel::Impl {
  LlamaWeights w;
  std::unique_ptr<KvCache> kv;
  runtime::WeightMemory weight_copy;  // empty when weights are used from the mapping
  // Activations, [batch][...] row-major, sized for max_batch.
  int cap = 0;
  std::vector<float> x, xn, q, k, v, att, gate, up, ffn_out;
  // Prepared activations, one per weight type in use (Q/K/V may differ in Q4_K_M).
  kernels::Acts acts_a, acts_b, acts_c;
  struct ThreadScratch {
    std::vector<float> keys, vals, scores;
  };
  std::vector<ThreadScratch> scratch;

  void reserve(int b, const LlamaConfig& c) {
    if (b <= cap) return;
    cap = b;
    x.resize(size_t(b) * c.dim);
    xn.resize(size_t(b) * c.dim);
    q.resize(size_t(b) * c.dim);
    k.resize(size_t(b) * c.kv_dim());
    v.resize(size_t(b) * c.kv_dim());
    att.resize(size_t(b) * c.dim);
    gate.resize(size_t(b) * c.ffn_dim);
    up.resize(size_t(b) * c.ffn_dim);
    ffn_out.resize(size_t(b) * c.dim);
  }
};

LlamaModel::LlamaModel(runtime::ThreadPool& pool) : pool_(pool), impl_(std::make_unique<Impl>()) {}
LlamaModel::~LlamaModel() = default;

std::unique_ptr<LlamaModel> LlamaModel::load(const std::filesystem::path& path,
                                             runtime::ThreadPool& pool, const ModelOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<LlamaModel> m(new LlamaModel(pool));
  m->file_ = gguf::File::open(path);
  m->cfg_ = read_llama_config(*m->file_);
  m->impl_->w = bind_weights(*m->file_, m->cfg_);
  if (opts.kv_type != GgmlType::F16 && opts.kv_type != GgmlType::F32)
    throw std::invalid_argument(fmt::format("{}: KV cache type must be f16 or f32, not {}",
                                            path.string(), traits(opts.kv_type).name));
  if (opts.n_ctx < 0) throw std::invalid_argument("n_ctx must be >= 0");
  m->n_ctx_ = opts.n_ctx > 0 ? opts.n_ctx : m->cfg_.n_ctx;
  m->load_.file_bytes = m->file_->bytes().size();
  m->load_.open_s = seconds_since(t0);

  auto& w = m->impl_->w;
  for (Mat* mat : w.matrices()) m->load_.weight_bytes += mat->bytes();
  m->load_.weight_bytes += w.norm_bytes;

  if (!opts.copy_weights && !opts.shared_weights.empty())
    throw std::invalid_argument(
        "--shared-weights maps a shared prepared copy of the weights, and --mmap uses the file "
        "in place (already shared through the page cache): drop one");
  bool copy = opts.copy_weights || opts.hugepages || opts.numa != runtime::NumaPolicy::none;
  if (copy) {
    auto t1 = std::chrono::steady_clock::now();
    CopyOptions co;
    co.hugepages = opts.hugepages;
    co.pack = opts.pack_weights;
    co.policy = opts.numa;
    co.nodes = opts.numa_nodes;
    co.progress = opts.progress;
    co.shared_dir = opts.shared_weights;
    auto r = copy_weights(*m->file_, w, co, pool);
    m->load_.shared = std::move(r.shared);
    m->load_.packed_bytes = r.packed_bytes;
    m->impl_->weight_copy = std::move(r.memory);
    m->load_.pages = m->impl_->weight_copy.kind();
    m->load_.page_note = r.note;
    m->load_.copy_s = seconds_since(t1);
  }
  if (opts.prefault) {
    auto t1 = std::chrono::steady_clock::now();
    prefault_weights(w, pool, opts.progress);
    m->load_.prefault_s = seconds_since(t1);
  }
  const auto& c = m->cfg_;
  m->impl_->kv =
      std::make_unique<KvCache>(c.n_layers, m->n_ctx_, c.n_kv_heads, c.head_dim, opts.kv_type);
  m->max_batch_ = std::max(1, opts.max_batch);
  m->impl_->scratch.resize(pool.size());
  m->load_.total_s = seconds_since(t0);
  return m;
}

GgmlType LlamaModel::weight_type() const {
  const auto& l = impl_->w.layers[0];
  // ffn_up: the bulk type (Q4_K_M keeps ffn_down and attn_v in Q6_K).
  return l.w_up.type;
}

uint64_t LlamaModel::weight_bytes_per_pass(int k) const {
  uint64_t total = 0;
  auto& w = impl_->w;
  for (const auto& l : w.layers)
    for (const Mat* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      total += m->bytes();
  total += w.output.bytes();
  total += w.norm_bytes;
  total += static_cast<uint64_t>(k) * w.tok_embd.row_bytes;
  return total;
}

std::vector<runtime::AddressRange> LlamaModel::weight_ranges() const {
  if (impl_->weight_copy.data()) {
    auto b = reinterpret_cast<uint64_t>(impl_->weight_copy.data());
    return {{b, b + impl_->weight_copy.size()}};
  }
  auto bytes = file_->bytes();
  auto b = reinterpret_cast<uint64_t>(bytes.data());
  // The mapping starts at the page holding the file's first byte.
  return {{b & ~uint64_t{4095}, b + bytes.size()}};
}

runtime::AddressRange LlamaModel::kv_range() const {
  if (!impl_->kv) return {};
  auto b = reinterpret_cast<uint64_t>(impl_->kv->data());
  return {b, b + impl_->kv->bytes()};
}

std::string LlamaModel::placement_summary() const {
  std::string err;
  auto entries = runtime::read_self_numa_maps(err);
  if (!err.empty()) return err;
  const auto ranges = weight_ranges();
  auto p = runtime::placement_of(entries, ranges);
  std::string out = fmt::format("{} ({})", p.summary(), runtime::page_kind_name(load_.pages));
  if (load_.shared.shared)
    out += fmt::format("; shared read-only from {} ({})", load_.shared.file,
                       load_.shared.built ? "built by this load" : "already there");
  if (load_.pages == runtime::PageKind::thp) {
    std::string e2;
    uint64_t huge = runtime::read_self_anon_huge_bytes(ranges, e2);
    out += e2.empty() ? fmt::format("; THP granted for {:.2f} GiB of {:.2f} GiB",
                                    huge / 1073741824.0, p.total_bytes() / 1073741824.0)
                      : "; " + e2;
  }
  return out;
}

void LlamaModel::truncate(int pos) {
  if (pos < 0) throw std::out_of_range(fmt::format("truncate({}): negative position", pos));
  pos_ = std::min(pos_, pos);
}

void LlamaModel::forward(std::span<const int32_t> tokens, float* logits) {
  for (size_t i = 0; i < tokens.size(); i += max_batch_) {
    size_t n = std::min<size_t>(max_batch_, tokens.size() - i);
    forward_chunk(tokens.subspan(i, n), logits ? logits + i * cfg_.n_vocab : nullptr, false);
  }
}

void LlamaModel::forward_last(std::span<const int32_t> tokens, float* logits) {
  for (size_t i = 0; i < tokens.size(); i += max_batch_) {
    size_t n = std::min<size_t>(max_batch_, tokens.size() - i);
    bool last = i + n == tokens.size();
    forward_chunk(tokens.subspan(i, n), last ? logits : nullptr, true);
  }
}

namespace {

// Rows of several matrices in one parallel region (Q/K/V, gate/up), in
// chunks; each output element is computed by exactly one chunk, so the split
// never changes a result.
void run_matmuls(runtime::ThreadPool& pool, std::initializer_list<MatJob> jobs) {
  // Each matrix starts at a multiple of kAlign rows in the row space, and so
  // does every chunk: a chunk starts a packed 16-row panel whatever the
  // matrices' row counts.
  constexpr int64_t kAlign = 32;
  auto span = [](const MatJob& j) { return (j.m->rows + kAlign - 1) / kAlign * kAlign; };
  int64_t total = 0, bytes = 0;
  for (const auto& j : jobs) {
    total += span(j);
    bytes += j.m->bytes();
  }
  // ~512 KiB of weights a chunk: the kernels' prefetch stops at a chunk's
  // end, so small chunks stall the stream, and large ones leave a small
  // matrix too few chunks to balance across threads.
  const int64_t row_bytes = std::max<int64_t>(1, bytes / total);
  const int64_t grain = std::max<int64_t>(1, (int64_t{512} << 10) / row_bytes / kAlign) * kAlign;
  pool.parallel_stream(total, grain, [&](int64_t b, int64_t e, int) {
    int64_t base = 0;
    for (const auto& j : jobs) {
      int64_t r0 = std::max(b, base), r1 = std::min(e, base + j.m->rows);
      if (r0 < r1)
        kernels::matmul_rows(j.m->type, j.m->layout, j.m->data, j.m->row_bytes, *j.acts, j.y, j.ldy,
                             r0 - base, r1 - base);
      base += span(j);
    }
  });
}

// prepare_acts with the token rows spread over the pool: each row is
// quantized on its own, so the bytes do not depend on the split (on one
// thread, the others would wait).
void prepare_acts(runtime::ThreadPool& pool, GgmlType type, const float* x, int n_tokens, int64_t k,
                  kernels::Acts& out) {
  if (n_tokens < 2 || pool.size() < 2) return kernels::prepare_acts(type, x, n_tokens, k, out);
  kernels::prepare_acts_shape(type, n_tokens, k, out);
  pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
    kernels::prepare_acts_rows(x, static_cast<int>(b), static_cast<int>(e), out);
  });
}

}  // namespace

void LlamaModel::forward_chunk(std::span<const int32_t> tokens, float* logits, bool last_only) {
  const int B = static_cast<int>(tokens.size());
  if (B == 0) return;
  if (pos_ + B > n_ctx_)
    throw std::out_of_range(
        fmt::format("context full: {} cached + {} new tokens > n_ctx {}", pos_, B, n_ctx_));
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.n_vocab)
      throw std::out_of_range(
          fmt::format("token id {} outside the vocabulary [0, {})", t, cfg_.n_vocab));
  impl_->reserve(B, cfg_);
  embed(tokens);
  for (int il = 0; il < cfg_.n_layers; ++il) {
    attention_block(il, B);
    ffn_block(il, B);
  }
  pos_ += B;
  if (logits) output_head(B, logits, last_only);
}

// x = the tokens' embedding rows.
void LlamaModel::embed(std::span<const int32_t> tokens) {
  Impl& s = *impl_;
  const Mat& e = s.w.tok_embd;
  const int dim = cfg_.dim;
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (e.layout == kernels::WeightLayout::packed16)
      kernels::dequantize_packed_row(e.type, e.data, e.row_bytes, e.rows, dim, tokens[t],
                                     &s.x[t * dim]);
    else
      kernels::dequantize_row(e.type, e.data + tokens[t] * e.row_bytes, &s.x[t * dim], dim);
  }
}

// x += wo * attention(rope(wq xn), rope(wk xn), wv xn), xn = rmsnorm(x); the
// new keys and values go into the cache at positions pos_ .. pos_ + B - 1.
void LlamaModel::attention_block(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const int dim = c.dim, kvd = c.kv_dim(), hd = c.head_dim;
  for (int t = 0; t < B; ++t)
    kernels::rmsnorm(&s.xn[size_t(t) * dim], &s.x[size_t(t) * dim], L.attn_norm.data(), dim,
                     c.norm_eps);
  prepare_acts(pool_, L.wq.type, s.xn.data(), B, dim, s.acts_a);
  const kernels::Acts* ak = &s.acts_a;
  const kernels::Acts* av = &s.acts_a;
  if (L.wk.type != L.wq.type) {
    prepare_acts(pool_, L.wk.type, s.xn.data(), B, dim, s.acts_b);
    ak = &s.acts_b;
  }
  if (L.wv.type != L.wq.type) {
    if (L.wv.type == L.wk.type) {
      av = ak;
    } else {
      prepare_acts(pool_, L.wv.type, s.xn.data(), B, dim, s.acts_c);
      av = &s.acts_c;
    }
  }
  run_matmuls(pool_, {{&L.wq, &s.acts_a, s.q.data(), dim},
                      {&L.wk, ak, s.k.data(), kvd},
                      {&L.wv, av, s.v.data(), kvd}});
  for (int t = 0; t < B; ++t) {
    const int p = pos_ + t;
    for (int h = 0; h < c.n_heads; ++h)
      kernels::rope(&s.q[size_t(t) * dim + size_t(h) * hd], hd, c.n_rot, p, c.rope_freq_base,
                    c.rope_freq_scale, false);
    for (int h = 0; h < c.n_kv_heads; ++h)
      kernels::rope(&s.k[size_t(t) * kvd + size_t(h) * hd], hd, c.n_rot, p, c.rope_freq_base,
                    c.rope_freq_scale, false);
    s.kv->store(il, p, &s.k[size_t(t) * kvd], &s.v[size_t(t) * kvd]);
  }
  attend_cached(il, B);
  prepare_acts(pool_, L.wo.type, s.att.data(), B, dim, s.acts_a);
  run_matmuls(pool_, {{&L.wo, &s.acts_a, s.ffn_out.data(), dim}});
  // Element-wise ops run per token row so each row takes the same code path
  // (vector body vs tail) whatever the batch size.
  for (int t = 0; t < B; ++t) kernels::add(&s.x[size_t(t) * dim], &s.ffn_out[size_t(t) * dim], dim);
}

// att = softmax(q k^T * scale) v per query head, causal, over layer il's cache.
void LlamaModel::attend_cached(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const int dim = c.dim, hd = c.head_dim;
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // One work item per (kv head, run of tokens): the head's keys and values
  // are converted once for the run's last token and serve every token of
  // the run and the `group` query heads that share them (per token, an
  // 8-token verify would convert them 8 times). Runs are the whole batch
  // unless that leaves fewer than ~4 items per thread.
  const int run = std::clamp(B * c.n_kv_heads / (4 * pool_.size()), 1, B);
  const int runs = (B + run - 1) / run;
  pool_.parallel_for(int64_t(runs) * c.n_kv_heads, 1, [&](int64_t b, int64_t e, int tid) {
    auto& ts = s.scratch[tid];
    for (int64_t item = b; item < e; ++item) {
      const int g = static_cast<int>(item % c.n_kv_heads);
      const int t0 = static_cast<int>(item / c.n_kv_heads) * run;
      const int t1 = std::min(B, t0 + run);
      const int n_max = pos_ + t1;  // the run's last token sees positions 0 .. pos_ + t1 - 1
      if (ts.scores.size() < size_t(n_max)) {
        // Grow geometrically up to n_ctx: long contexts pay for what they use.
        size_t cap = std::min<size_t>(n_ctx_, std::max<size_t>(n_max, ts.scores.size() * 2));
        ts.keys.resize(cap * hd);
        ts.vals.resize(cap * hd);
        ts.scores.resize(cap);
      }
      s.kv->load_k(il, g, 0, n_max, ts.keys.data());
      s.kv->load_v(il, g, 0, n_max, ts.vals.data());
      for (int t = t0; t < t1; ++t) {
        const int n = pos_ + t + 1;  // causal: positions 0 .. pos_ + t
        for (int h = g * group; h < (g + 1) * group; ++h)
          kernels::attend(&s.q[size_t(t) * dim + size_t(h) * hd], ts.keys.data(), ts.vals.data(), n,
                          hd, scale, ts.scores.data(), &s.att[size_t(t) * dim + size_t(h) * hd]);
      }
    }
  });
}

// x += w_down (silu(w_gate xn) * (w_up xn)), xn = rmsnorm(x): SwiGLU.
void LlamaModel::ffn_block(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const int dim = c.dim, ffn = c.ffn_dim;
  for (int t = 0; t < B; ++t)
    kernels::rmsnorm(&s.xn[size_t(t) * dim], &s.x[size_t(t) * dim], L.ffn_norm.data(), dim,
                     c.norm_eps);
  prepare_acts(pool_, L.w_gate.type, s.xn.data(), B, dim, s.acts_a);
  const kernels::Acts* au = &s.acts_a;
  if (L.w_up.type != L.w_gate.type) {
    prepare_acts(pool_, L.w_up.type, s.xn.data(), B, dim, s.acts_b);
    au = &s.acts_b;
  }
  run_matmuls(pool_, {{&L.w_gate, &s.acts_a, s.gate.data(), ffn}, {&L.w_up, au, s.up.data(), ffn}});
  {
    // An exp per element: worth spreading over the pool. Pieces of a token
    // row start at multiples of 64, and the op is elementwise, so the split
    // changes no result.
    const int64_t piece = std::max<int64_t>(64, (ffn / (2 * pool_.size()) + 63) / 64 * 64);
    const int64_t per_row = (ffn + piece - 1) / piece;
    pool_.parallel_for(B * per_row, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t item = b; item < e; ++item) {
        const int64_t from = item % per_row * piece;  // within the token's row
        const size_t at = size_t(item / per_row) * ffn + size_t(from);
        kernels::silu_mul(&s.gate[at], &s.up[at], std::min<int64_t>(piece, ffn - from));
      }
    });
  }
  prepare_acts(pool_, L.w_down.type, s.gate.data(), B, ffn, s.acts_a);
  run_matmuls(pool_, {{&L.w_down, &s.acts_a, s.ffn_out.data(), dim}});
  for (int t = 0; t < B; ++t) kernels::add(&s.x[size_t(t) * dim], &s.ffn_out[size_t(t) * dim], dim);
}

// logits = output * rmsnorm(x) for every token, or only the last (prefill).
void LlamaModel::output_head(int B, float* logits, bool last_only) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const int dim = c.dim;
  const int first = last_only ? B - 1 : 0;
  const int nout = B - first;
  for (int t = first; t < B; ++t)
    kernels::rmsnorm(&s.xn[size_t(t - first) * dim], &s.x[size_t(t) * dim], s.w.output_norm.data(),
                     dim, c.norm_eps);
  prepare_acts(pool_, s.w.output.type, s.xn.data(), nout, dim, s.acts_a);
  run_matmuls(pool_, {{&s.w.output, &s.acts_a, logits, c.n_vocab}});
}

}  // namespace epyctune::engine
