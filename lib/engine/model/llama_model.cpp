#include "engine/model/llama_model.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "common/elapsed.hpp"
#include "common/field_error.hpp"
#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/llama_impl.hpp"
#include "engine/model/llama_weights.hpp"
#include "engine/runtime/numa_maps.hpp"
#include "engine/runtime/progress.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {
namespace {

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

LlamaModel::LlamaModel(runtime::ThreadPool& pool) : pool_(&pool), impl_(std::make_unique<Impl>()) {}
LlamaModel::~LlamaModel() = default;

std::unique_ptr<LlamaModel> LlamaModel::load(const std::filesystem::path& path,
                                             runtime::ThreadPool& pool, const ModelOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<LlamaModel> m(new LlamaModel(pool));
  m->file_ = gguf::File::open(path);
  m->cfg_ = read_llama_config(*m->file_);
  m->impl_->w = bind_weights(*m->file_, m->cfg_);
  if (opts.kv_type != GgmlType::F16 && opts.kv_type != GgmlType::F32 &&
      opts.kv_type != GgmlType::Q8_0)
    throw std::invalid_argument(fmt::format("{}: KV cache type must be f16, f32 or q8_0, not {}",
                                            path.string(), traits(opts.kv_type).name));
  if (opts.n_ctx < 0) throw std::invalid_argument("n_ctx must be >= 0");
  m->n_ctx_ = opts.n_ctx > 0 ? opts.n_ctx : m->cfg_.n_ctx;
  m->load_.file_bytes = m->file_->bytes().size();
  m->load_.open_s = common::seconds_since(t0);

  auto& w = m->impl_->w;
  for (Mat* mat : w.matrices()) m->load_.weight_bytes += mat->bytes();
  m->load_.weight_bytes += w.norm_bytes;

  if (!opts.copy_weights && !opts.shared_weights.empty())
    throw common::FieldError("shared_weights",
                             "maps a shared prepared copy of the weights, while using the file "
                             "mapping in place (mmap) already shares it through the page cache: "
                             "drop one");
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
    m->load_.copy_s = common::seconds_since(t1);
  }
  if (opts.prefault) {
    auto t1 = std::chrono::steady_clock::now();
    prefault_weights(w, pool, opts.progress);
    m->load_.prefault_s = common::seconds_since(t1);
  }
  const auto& c = m->cfg_;
  const KvShape shape{c.n_layers, c.n_kv_heads, c.head_dim, opts.kv_type};
  shape.check();
  const int64_t budget_blocks =
      std::max({KvPool::blocks_for(m->n_ctx_) * std::max(1, opts.kv_contexts),
                KvPool::blocks_for(opts.kv_tokens),
                std::max<int64_t>(0, opts.kv_bytes) / int64_t(shape.block_bytes())});
  m->kv_pool_ = std::make_shared<KvPool>(shape, budget_blocks);
  m->seq_ = m->pooled_sequence();
  m->impl_->rope = std::make_unique<RopeTable>(c, w.rope_freqs);
  m->setup_moe(opts.experts_per_token);
  m->max_batch_ = std::max(1, opts.max_batch);
  m->impl_->scratch.resize(pool.size());
  m->load_.total_s = common::seconds_since(t0);
  return m;
}

void LlamaModel::set_pool(runtime::ThreadPool& pool) {
  pool_ = &pool;
  if (impl_->scratch.size() < static_cast<size_t>(pool.size()))
    impl_->scratch.resize(static_cast<size_t>(pool.size()));
}

// The --experts-per-token override, checked against the file's experts.
void LlamaModel::setup_moe(int experts_per_token) {
  if (experts_per_token < 0)
    throw common::FieldError("experts_per_token",
                             fmt::format("{}: must be >= 1 (0: the model's)", experts_per_token));
  if (experts_per_token > 0 && cfg_.n_expert == 0)
    throw common::FieldError(
        "experts_per_token",
        fmt::format("{}: {} is a dense {} model, it has no experts to choose from",
                    experts_per_token, file_->path(), cfg_.arch_name));
  if (experts_per_token > cfg_.n_expert)
    throw common::FieldError("experts_per_token",
                             fmt::format("{}: {} has {} experts per layer", experts_per_token,
                                         file_->path(), cfg_.n_expert));
  if (experts_per_token > 0) cfg_.n_expert_used = experts_per_token;
  if (cfg_.n_expert == 0) return;
  auto& s = impl_->moe_shape;
  s = MoeShape{};
  s.dim = cfg_.dim;
  s.n_expert = cfg_.n_expert;
  s.n_used = cfg_.n_expert_used;
  s.expert_ffn = cfg_.expert_ffn_dim;
  s.norm_weights = cfg_.expert_weights_norm;
  s.weights_scale = cfg_.expert_weights_scale;
  s.gating = cfg_.moe_gating;
  s.glu = cfg_.expert_glu;
  s.sigmoid = cfg_.expert_gating == ExpertGating::sigmoid;
  s.n_groups = cfg_.n_expert_groups;
  s.n_group_used = cfg_.n_group_used;
  for (const auto& l : impl_->w.layers)
    if (l.ffn_kind == FfnKind::moe) check_moe_weights(l.moe, s);
}

float LlamaModel::min_router_gap() const {
  return impl_->moe.min_router_gap();
}
void LlamaModel::reset_router_gap() {
  impl_->moe.reset_router_gap();
}

GgmlType LlamaModel::weight_type() const {
  const auto& l = impl_->w.layers[0];
  // ffn_up: the bulk type (Q4_K_M keeps ffn_down and attn_v in Q6_K).
  return l.ffn_kind == FfnKind::moe ? l.moe.up_exps.type : l.w_up.type;
}

uint64_t LlamaModel::weight_bytes_per_pass(int k) const {
  uint64_t total = 0;
  auto& w = impl_->w;
  const double ne = cfg_.n_expert, used = cfg_.n_expert_used;
  // Expected distinct experts of k tokens: ne * (1 - P(a token misses one)^k).
  const double distinct = ne > 0 ? ne * (1.0 - std::pow(1.0 - used / ne, std::max(1, k))) : 0;
  for (const auto& l : w.layers) {
    for (const Mat* m : l.matrices()) total += m->bytes();
    total += l.mla.wk_b_t.bytes();  // made at load, so not among the file's matrices
    if (l.ffn_kind != FfnKind::moe) continue;
    // All experts were counted above: keep only the ones a pass reads.
    const auto& m = l.moe;
    const uint64_t experts = m.gate_exps.bytes() + m.up_exps.bytes() + m.down_exps.bytes();
    total -= experts;
    total += static_cast<uint64_t>(
        std::llround(static_cast<double>(experts) / ne * (k <= 1 ? used : distinct)));
  }
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
  if (!kv_pool_) return {};
  auto b = reinterpret_cast<uint64_t>(kv_pool_->data());
  return {b, b + kv_pool_->bytes()};
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
  seq_->truncate(pos);
}

void LlamaModel::forward(std::span<const int32_t> tokens, float* logits) {
  forward_default(tokens, logits, false);
}

void LlamaModel::forward_last(std::span<const int32_t> tokens, float* logits) {
  forward_default(tokens, logits, true);
}

void LlamaModel::forward_default(std::span<const int32_t> tokens, float* logits, bool last_only) {
  std::vector<SeqRow> rows(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    rows[i] = {seq_.get(), tokens[i], !last_only || i + 1 == tokens.size()};
  forward_rows(rows, logits);
}

namespace detail {

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

// On one thread the other workers would wait: rows are spread over the pool.
void prepare_acts(runtime::ThreadPool& pool, GgmlType type, const float* x, int n_tokens, int64_t k,
                  kernels::Acts& out) {
  if (n_tokens < 2 || pool.size() < 2) return kernels::prepare_acts(type, x, n_tokens, k, out);
  kernels::prepare_acts_shape(type, n_tokens, k, out);
  pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
    kernels::prepare_acts_rows(x, static_cast<int>(b), static_cast<int>(e), out);
  });
}

}  // namespace detail

void LlamaModel::run_layers(int B) {
  for (int il = 0; il < cfg_.n_layers; ++il) {
    attention_block(il, B);
    ffn_block(il, B);
  }
}

Sequence::Sequence(std::unique_ptr<KvCache> kv) : kv_(std::move(kv)) {}
Sequence::~Sequence() = default;

void Sequence::truncate(int pos) {
  if (pos < 0) throw std::out_of_range(fmt::format("truncate({}): negative position", pos));
  pos_ = std::min(pos_, pos);
  kv_->truncate(pos_);
  // A block kept in part no longer holds the tokens it was published
  // under once the next token is written: unpublished now, while this
  // sequence alone holds it, so that no request maps it meanwhile (that
  // would make the write a copy, a block the reservation did not count).
  const auto& table = kv_->table();
  const size_t part = size_t(pos_) / KvPool::kBlockPositions;
  if (pos_ % KvPool::kBlockPositions != 0 && part < table.size()) {
    KvPool& pool = kv_->pool();
    const int b = table[part];
    if (pool.published(b) && pool.refs(b) == 1) pool.unpublish(b);
  }
  if (tokens_.size() > size_t(pos_)) tokens_.resize(size_t(pos_));
  hashes_.resize(std::min(hashes_.size(), size_t(pos_) / KvPool::kBlockPositions));
}

void Sequence::clear() {
  truncate(0);
  kv_->drop_reservation();
}

uint64_t Sequence::kv_bytes() const {
  return kv_->bytes();
}

int Sequence::admit(std::span<const int32_t> prompt, int64_t positions) {
  if (pos_ != 0 || !kv_->table().empty())
    throw std::logic_error("Sequence::admit: the sequence is not empty");
  KvPool& pool = kv_->pool();
  const int64_t max_shared =
      prompt.empty() ? 0 : int64_t(prompt.size() - 1) / KvPool::kBlockPositions;
  auto a = pool.plan(prompt, max_shared, positions);
  if (!a.fits) return -1;
  kv_->map_prefix(a.shared);
  if (!kv_->reserve_positions(positions)) {  // cannot happen after plan(): keep it whole
    kv_->truncate(0);
    return -1;
  }
  pos_ = static_cast<int>(a.shared.size()) * KvPool::kBlockPositions;
  tokens_.assign(prompt.begin(), prompt.begin() + pos_);
  hashes_ = std::move(a.hashes);
  return pos_;
}

void Sequence::appended(int pos0, std::span<const int32_t> tokens) {
  KvPool& pool = kv_->pool();
  if (!pool.indexing()) return;
  tokens_.resize(size_t(pos0));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  constexpr size_t kB = KvPool::kBlockPositions;
  for (size_t blk = hashes_.size(); (blk + 1) * kB <= tokens_.size(); ++blk) {
    std::span<const int32_t> bt(tokens_.data() + blk * kB, kB);
    hashes_.push_back(KvPool::chain_hash(blk ? hashes_[blk - 1] : 0, bt));
    pool.publish(kv_->table()[blk], hashes_.back(), bt);
  }
}

std::unique_ptr<Sequence> LlamaModel::new_sequence() const {
  return make_sequence(kv_pool_->shape().type);
}

std::unique_ptr<Sequence> LlamaModel::pooled_sequence() const {
  return std::unique_ptr<Sequence>(new Sequence(std::make_unique<KvCache>(kv_pool_)));
}

std::unique_ptr<Sequence> LlamaModel::make_sequence(GgmlType kv_type) const {
  const auto& c = cfg_;
  return std::unique_ptr<Sequence>(new Sequence(
      std::make_unique<KvCache>(c.n_layers, n_ctx_, c.n_kv_heads, c.head_dim, kv_type)));
}

void LlamaModel::forward_rows(std::span<const SeqRow> rows, float* logits) {
  // Checked whole before anything runs, so a bad batch moves no sequence.
  std::vector<std::pair<Sequence*, int>> runs;  // each sequence and its row count
  for (const auto& r : rows) {
    if (!r.seq) throw std::invalid_argument("forward_rows: a row without a sequence");
    if (r.token < 0 || r.token >= cfg_.n_vocab)
      throw std::out_of_range(
          fmt::format("token id {} outside the vocabulary [0, {})", r.token, cfg_.n_vocab));
    if (!runs.empty() && runs.back().first == r.seq) {
      ++runs.back().second;
      continue;
    }
    for (const auto& [seq, n] : runs)
      if (seq == r.seq)
        throw std::invalid_argument("forward_rows: a sequence's rows must be contiguous");
    runs.emplace_back(r.seq, 1);
  }
  for (const auto& [seq, n] : runs)
    if (seq->pos_ + n > n_ctx_)
      throw std::out_of_range(
          fmt::format("context full: {} cached + {} new tokens > n_ctx {}", seq->pos_, n, n_ctx_));
  // Blocks for every new position (may throw: the pool is full), before any
  // sequence moves.
  for (const auto& [seq, n] : runs) seq->kv_->prepare(seq->pos_, seq->pos_ + n);
  std::vector<int32_t> tokens;
  std::vector<int> out_rows;
  float* out = logits;
  for (size_t i = 0; i < rows.size(); i += size_t(max_batch_)) {
    const int B = static_cast<int>(std::min<size_t>(size_t(max_batch_), rows.size() - i));
    Impl& s = *impl_;
    s.reserve(B, cfg_);
    s.at.resize(size_t(B));
    s.segs.clear();
    tokens.resize(size_t(B));
    for (int t = 0; t < B; ++t) {
      const SeqRow& r = rows[i + size_t(t)];
      if (t == 0 || rows[i + size_t(t) - 1].seq != r.seq) s.segs.push_back({t, t});
      auto& seg = s.segs.back();
      s.at[size_t(t)] = {r.seq->kv_.get(), r.seq->pos_ + (t - seg.t0)};
      seg.t1 = t + 1;
      tokens[size_t(t)] = r.token;
    }
    embed(tokens);
    run_layers(B);
    for (const auto& seg : s.segs) {
      Sequence& q = *rows[i + size_t(seg.t0)].seq;
      q.appended(q.pos_,
                 std::span<const int32_t>(tokens).subspan(size_t(seg.t0), size_t(seg.t1 - seg.t0)));
      q.pos_ += seg.t1 - seg.t0;
    }
    if (!out) continue;
    out_rows.clear();
    for (int t = 0; t < B; ++t)
      if (rows[i + size_t(t)].logits) out_rows.push_back(t);
    output_rows(out_rows, out);
    out += out_rows.size() * size_t(cfg_.n_vocab);
  }
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

// logits = output * rmsnorm(x) for the listed rows.
void LlamaModel::output_rows(const std::vector<int>& rows, float* logits) {
  if (rows.empty()) return;
  Impl& s = *impl_;
  const auto& c = cfg_;
  const int dim = c.dim;
  const int nout = static_cast<int>(rows.size());
  for (int i = 0; i < nout; ++i)
    kernels::rmsnorm(&s.xn[size_t(i) * dim], &s.x[size_t(rows[size_t(i)]) * dim],
                     s.w.output_norm.data(), dim, c.norm_eps);
  detail::prepare_acts(*pool_, s.w.output.type, s.xn.data(), nout, dim, s.acts_a);
  detail::run_matmuls(*pool_, {{&s.w.output, &s.acts_a, logits, c.n_vocab}});
}

}  // namespace epyctune::engine
