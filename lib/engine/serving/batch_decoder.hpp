// Continuous batching on one model: up to `slots` sequences at once, each
// step one forward pass (LlamaModel::forward_rows) over the next token of
// every decoding sequence plus a budgeted chunk of the pending prompts. A new
// request joins at the next step; a finished or cancelled one leaves at once.
// Single-threaded: the caller drives step() from the thread that owns the
// model's pool.
//
// Memory: every slot's sequence takes 16-position blocks of the model's KV
// pool (LlamaModel::kv_pool). A request is added only when every block it
// can ever need (prompt + n_predict, capped by n_ctx) can be reserved, so
// nothing added ever stops for lack of memory; fits() says whether it can.
//
// Prefix reuse: the pool indexes every full block of every request, running
// or finished, by the hash chain of its tokens. A new request maps each
// leading full block of its prompt the pool holds, whichever slot computed
// it, and computes only the rest (multi-turn chat re-sends the history;
// agents and shared system prompts repeat their start). Finished requests'
// blocks stay cached until a reservation needs them (LRU).
//
// Each request's tokens are those plain decoding (speculative::Generator
// without a draft) gives for it alone: the passes are batch-invariant, and
// the sampler's draw depends only on (seed, position).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/serving/batch_drafter.hpp"
#include "engine/serving/draft_policy.hpp"
#include "engine/serving/prefill_pacer.hpp"
#include "engine/speculative/ngram_lookup.hpp"  // LookupOptions
#include "engine/speculative/speculative.hpp"

namespace epyctune::engine::serving {

struct SlotRequest {
  std::vector<int32_t> prompt;  // non-empty, every id in the vocabulary, <= n_ctx tokens
  int n_predict = 16;
  sampling::SamplerParams sampler;
  // Every generated token in order; false stops the request (finish: stop).
  std::function<bool(int32_t)> on_token;
  // End-of-generation tokens (finish: stop, after on_token saw it); empty: none.
  std::function<bool(int32_t)> is_stop;
  // Polled before each step: true drops the request (finish: cancelled).
  std::function<bool()> cancelled;
};

struct SlotResult {
  enum class Finish { stop, length, cancelled };
  uint64_t id = 0;
  Finish finish = Finish::length;
  std::vector<int32_t> tokens;
  speculative::SpecStats stats;  // prompt_tokens, generated, target_passes, prompt_s, generate_s
  int64_t reused_prompt_tokens = 0;  // of stats.prompt_tokens, found in the KV pool
};

// One slot as /slots shows it.
struct SlotState {
  int slot = 0;
  bool busy = false;
  uint64_t id = 0;        // the request's (0 when idle)
  int prompt_tokens = 0;  // its prompt's length
  int prompt_done = 0;    // prompt tokens in the cache so far
  int generated = 0;
  int n_predict = 0;
  int cached = 0;           // positions in the slot's KV cache
  std::vector<int> blocks;  // the pool blocks holding them, in order
  int64_t reserved = 0;     // blocks reserved for the rest of the request
  // The request's proposals (lookup and draft model) verified and kept.
  int64_t drafted = 0, accepted = 0;
};

// The KV pool as /health and /metrics show it.
struct KvGauges {
  int64_t blocks_used = 0;    // mapped by a sequence
  int64_t blocks_cached = 0;  // held by no sequence, kept for prefix reuse
  int64_t blocks_total = 0;
  int64_t blocks_reserved = 0;
  int block_tokens = 0;
  uint64_t evictions = 0;
};

struct BatchOptions {
  // Prompt tokens per step across all prefilling slots, so a long prompt is
  // spread over steps instead of stalling the others; while others decode,
  // PrefillPacer takes fewer, so that their steps take at most about
  // prefill_gap times a step without prompt rows (0: no pacing).
  int prefill_budget = 256;
  double prefill_gap = kDefaultPrefillGap;
  // Proposals for the decoding requests, verified in the same pass as their
  // next token where DraftPolicy finds they pay (not while a prompt is being
  // read); every token is still the one plain decoding gives. n-gram lookup
  // first; a draft model (its own KV pool, BatchDrafter) where the lookup
  // has none.
  speculative::LookupOptions lookup;
  LlamaModel* draft = nullptr;
  int max_drafts = 8;  // proposals per request and pass, at most
};

class BatchDecoder {
 public:
  BatchDecoder(LlamaModel& model, int slots, const BatchOptions& opts = {});
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  int slots() const { return static_cast<int>(slots_.size()); }
  int active() const;
  bool has_room() const { return active() < slots(); }
  // Whether r's blocks can be reserved now, later (when others end), or
  // never (more than the whole pool).
  enum class Fit { now, later, never };
  Fit fits(const SlotRequest& r) const;
  // Positions r may ever need: prompt + n_predict, capped by n_ctx.
  int64_t positions(const SlotRequest& r) const;
  // Takes a free slot (throws std::logic_error when none is or its blocks
  // do not fit now, and std::invalid_argument for a prompt the model cannot
  // take or one that never fits). Returns the request's id.
  uint64_t add(SlotRequest r);
  // One pass over every active request; returns those that ended in it (or
  // were cancelled before it). Throws what the model throws, leaving every
  // request active: the caller fails them with fail_all().
  std::vector<SlotResult> step();
  // Ends every active request as cancelled and frees its slot.
  std::vector<SlotResult> fail_all();
  std::vector<SlotState> states() const;
  // Replaces the cost model that decides which proposals are verified.
  void set_draft_policy(const DraftPolicy& p) { drafting_ = p; }
  KvGauges kv() const;

 private:
  struct Slot;
  SlotResult finish(Slot& s, SlotResult::Finish f);
  // Adds the decoders' proposals worth verifying to rows (decode rows
  // first, then prompt rows); returns how many.
  int propose(const std::vector<Slot*>& decoders, std::vector<SeqRow>& rows);
  // Each decoder's proposals from the lookup; those with none are returned.
  std::vector<Slot*> look_up(const std::vector<Slot*>& decoders);
  // The draft model's proposals for them, as many as pay beside `rows` rows.
  void draft(const std::vector<Slot*>& asked, int rows, int decoding);
  int64_t room(const Slot& s) const;
  LlamaModel& model_;
  PrefillPacer pacer_;
  speculative::LookupOptions lookup_;
  int max_drafts_;
  std::unique_ptr<BatchDrafter> drafter_;
  DraftPolicy drafting_;
  uint64_t next_id_ = 1;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace epyctune::engine::serving
