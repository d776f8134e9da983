// A llama-family model (RMSNorm, RoPE, GQA, SwiGLU) over a GGUF file: llama
// (with Llama 3.1's rope scaling), qwen2 (QKV biases), qwen3 (Q/K norms).
//
// Weights are used in place from the file mapping (or from a hugepage /
// NUMA-placed copy). forward() runs K tokens through every weight matrix once
// (kernels::matmul_rows over all K activation rows); every op is computed per
// token independently of K and of the thread count, so a batch of K gives
// bit-identical logits to K single-token calls, with 1 or N threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.hpp"
#include "engine/model/causal_lm.hpp"
#include "engine/model/llama_config.hpp"
#include "engine/runtime/numa_maps.hpp"
#include "engine/runtime/progress.hpp"
#include "engine/runtime/shared_weights.hpp"
#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine {
namespace gguf {
class File;
}
namespace runtime {
class ThreadPool;
}

struct ModelOptions {
  int n_ctx = 0;                     // 0 = the model's context_length
  GgmlType kv_type = GgmlType::F16;  // F16, F32 or Q8_0
  // The model's KV pool (kv_pool.hpp), shared by the default sequence and
  // pooled_sequence()s: in positions, bytes or contexts of n_ctx, the
  // largest wins (by default one context).
  int64_t kv_tokens = 0, kv_bytes = 0;
  int kv_contexts = 1;
  // Weight memory: copied out of the file mapping into anonymous memory (THP;
  // MAP_HUGETLB when asked), where NUMA placement and repacking can happen.
  // false: used in place from the file mapping (shared page cache, no repack).
  bool copy_weights = true;
  // Repack Q4_0 / Q8_0 / Q4_K matrices into the kernels' packed16 layout while
  // copying, when the active ISA has kernels for it (bit-identical results).
  bool pack_weights = true;
  bool hugepages = false;                                // implies copy_weights
  runtime::NumaPolicy numa = runtime::NumaPolicy::none;  // != none implies copy_weights
  std::vector<int> numa_nodes;  // empty = all memory nodes (local: the pool's nodes)
  // Non-empty: the copy lives in a store file in this directory, mapped
  // read-only and shared by every process that loads the same model with the
  // same layout, ISA and placement (runtime/shared_weights.hpp); built there
  // first when absent. Implies copy_weights.
  std::filesystem::path shared_weights;
  int max_batch = 64;  // longer forward() calls are split in chunks of this
  // Read every weight page at load (in parallel on the pool), so the first
  // forward() does not pay the page faults / disk reads.
  bool prefault = false;
  // Reports the weight copy ("copy") and page-in ("page-in") in bytes, on the
  // loading thread; null: silent.
  runtime::ProgressFn progress;
  // Experts run per token in a mixture-of-experts model, instead of the
  // file's <arch>.expert_used_count (fewer: faster, drifting from the full
  // output); 0 = the file's. An error for a dense model.
  int experts_per_token = 0;
};

struct LoadReport {
  double open_s = 0;      // mmap + GGUF parse + metadata/shape checks
  double copy_s = 0;      // copy into WeightMemory (0 without copy)
  double prefault_s = 0;  // reading every weight page (ModelOptions::prefault)
  double total_s = 0;
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;
  runtime::PageKind pages = runtime::PageKind::file_mmap;
  uint64_t packed_bytes = 0;          // weight bytes repacked into the packed16 layout
  std::string page_note;              // why hugetlb fell back, NUMA bind errors
  runtime::SharedWeightsInfo shared;  // shared.shared: mapped from a store file
};

class KvCache;
class KvPool;

// One sequence's KV cache and position, beside the model's default one:
// many sequences share one model's weights, and LlamaModel::forward_rows runs
// rows of several in one pass. Made by LlamaModel::new_sequence (a cache of
// its own) or pooled_sequence (blocks of the model's pool); must not outlive
// the model.
class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  int pos() const { return pos_; }
  // Drops every cached position >= pos (a pooled sequence gives back the
  // blocks past it).
  void truncate(int pos);
  // truncate(0), and the reservation given back.
  void clear();
  uint64_t kv_bytes() const;  // mapped (address space), not resident
  const KvCache& kv() const { return *kv_; }
  // An empty pooled sequence takes the cached blocks holding the leading
  // full blocks of prompt (at most (prompt.size() - 1) / 16 of them: the
  // last prompt token is always computed, for its logits), and reserves
  // every other block that `positions` positions need. Returns the
  // positions now cached, or -1 (nothing taken) when the pool cannot
  // promise the blocks now.
  int admit(std::span<const int32_t> prompt, int64_t positions);

 private:
  friend class LlamaModel;
  explicit Sequence(std::unique_ptr<KvCache> kv);
  // After a pass appended tokens at [pos0, pos0 + n): publishes the blocks
  // they completed (when the pool indexes prefixes).
  void appended(int pos0, std::span<const int32_t> tokens);
  std::unique_ptr<KvCache> kv_;
  int pos_ = 0;
  std::vector<int32_t> tokens_;   // every cached position's token (indexing pools)
  std::vector<uint64_t> hashes_;  // each full block's chain hash
};

// One row of a multi-sequence pass: the next token of one sequence.
struct SeqRow {
  Sequence* seq = nullptr;
  int32_t token = 0;
  bool logits = true;  // false: the row only extends its cache (a prompt's inner rows)
};

class LlamaModel : public CausalLM {
 public:
  // The pool runs every parallel region of this model and must outlive it.
  static std::unique_ptr<LlamaModel> load(const std::filesystem::path& path,
                                          runtime::ThreadPool& pool, const ModelOptions& opts = {});
  ~LlamaModel() override;

  int n_vocab() const override { return cfg_.n_vocab; }
  int n_ctx() const override { return n_ctx_; }
  // forward(), pos() and truncate() work on the model's default sequence.
  int pos() const override { return seq_->pos(); }
  // Throws std::out_of_range past n_ctx() or for a token id outside [0, n_vocab).
  // logits may be null: the tokens only extend the cache (no output head).
  void forward(std::span<const int32_t> tokens, float* logits) override;
  void truncate(int pos) override;

  // Like forward(), but computes only the last token's logits (prompt
  // prefill); identical to forward()'s last row.
  void forward_last(std::span<const int32_t> tokens, float* logits);

  // A new sequence with a cache of n_ctx() positions, in the default
  // sequence's KV type. Its memory is taken as positions are reached.
  std::unique_ptr<Sequence> new_sequence() const;
  // A new sequence over the model's KV pool: blocks taken as positions are
  // reached (within a reservation: Sequence::admit), given back by truncate.
  std::unique_ptr<Sequence> pooled_sequence() const;
  KvPool& kv_pool() const { return *kv_pool_; }
  // Appends each row's token to its sequence in one batched pass: every
  // weight matrix is read once for all rows, and each row attends to its own
  // sequence's cache. A sequence's rows must be contiguous, in order. logits
  // (may be null) receives n_vocab() floats for each row with `logits` set,
  // in row order. Each row's logits are bit for bit those of running its
  // sequence alone. Throws
  // std::invalid_argument for a null or split sequence, std::out_of_range
  // as forward() does; on a throw no sequence has moved.
  void forward_rows(std::span<const SeqRow> rows, float* logits);

  const LlamaConfig& config() const { return cfg_; }
  const gguf::File& file() const { return *file_; }  // for Tokenizer::from_gguf
  runtime::ThreadPool& pool() const { return *pool_; }
  // Runs the next passes on another pool (of any size; it must outlive the
  // model or be replaced first). Weights and caches stay where they are: a
  // partitioned run hands the draft's CPUs to the target while drafting pauses.
  // Not while a pass runs.
  void set_pool(runtime::ThreadPool& pool);
  const LoadReport& load_report() const { return load_; }
  // The main weight type (that of blk.0.ffn_down.weight... the most bytes).
  GgmlType weight_type() const;
  // Weight bytes one forward() of k tokens reads: every matrix and norm once,
  // plus k rows of token_embd. Of a mixture-of-experts layer, only the router
  // and the experts the k tokens select: exactly experts_per_token for k = 1,
  // and for k > 1 the expected number of distinct experts when each token
  // picks its experts independently and uniformly (routing is data-dependent).
  uint64_t weight_bytes_per_pass(int k) const;
  // Mixture-of-experts models: MoeFfn::min_router_gap over every layer and
  // token since the last reset (infinity for a dense model).
  float min_router_gap() const;
  void reset_router_gap();
  // Where the weight pages are (from /proc/self/numa_maps); err on failure.
  std::string placement_summary() const;
  // The address ranges of the weights (the copy, or the file mapping) and of
  // the KV pool, for binding and reading back their NUMA placement.
  std::vector<runtime::AddressRange> weight_ranges() const;
  runtime::AddressRange kv_range() const;

 private:
  struct Impl;
  LlamaModel(runtime::ThreadPool& pool);
  std::unique_ptr<Sequence> make_sequence(GgmlType kv_type) const;
  // The default sequence's rows: every one with logits, or only the last.
  void forward_default(std::span<const int32_t> tokens, float* logits, bool last_only);
  // The layers over B rows whose embeddings, positions and caches impl_
  // holds (Impl::at, Impl::segs).
  void run_layers(int B);
  // forward_rows' steps, on the B tokens' activation rows in impl_.
  void setup_moe(int experts_per_token);
  void embed(std::span<const int32_t> tokens);
  void attention_block(int il, int B);
  void project_qkv(int il, int B);
  void finish_qkv(int il, float* q, float* k, float* v, int p);
  void attend_cached(int il, int B);
  void ffn_block(int il, int B);
  // deepseek2 (mla_attention.cpp): latent attention, and the shared experts
  // added to ffn_out.
  void mla_attention_block(int il, int B);
  void mla_expand_kv(int il, int B);
  void mla_attend(int il, int B);
  void shared_experts(int il, int B);
  // The output head of the listed activation rows, into consecutive logits rows.
  void output_rows(const std::vector<int>& rows, float* logits);

  runtime::ThreadPool* pool_;
  std::unique_ptr<gguf::File> file_;
  LlamaConfig cfg_;
  int n_ctx_ = 0;
  int max_batch_ = 64;
  LoadReport load_;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<KvPool> kv_pool_;
  std::unique_ptr<Sequence> seq_;  // the default sequence, on kv_pool_
};

}  // namespace epyctune::engine
