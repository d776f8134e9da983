// Proposes draft tokens from n-gram lookup over the whole context (a
// SuffixIndex), a draft model, or both in cascade (lookup first; the model
// fills in where lookup has nothing).
//
// With an autoregressive draft a proposal is a function of the context alone
// (lookup is deterministic, the model's sample at position n uses the (seed, n)
// random stream), which is what lets the pipelined drafter run ahead and still
// give the same text as the time-shared one. A parallel (PARD) draft predicts
// the later tokens of a batch without seeing the earlier ones, so its
// proposals depend on where a batch starts: greedy output is still the
// target's own, sampled output still has the target's distribution, but the
// two schedules may sample different texts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/model/causal_lm.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/ngram_lookup.hpp"
#include "engine/speculative/suffix_index.hpp"

namespace epyctune::engine::speculative {

struct Proposal {
  int32_t token = -1;
  bool from_model = false;
  // The draft model's distribution the token was drawn from (sampling mode
  // only); empty for lookup (a one-hot proposal) and for greedy drafting.
  std::vector<float> q;
};

class Drafter {
 public:
  // model may be null (lookup only). The Drafter owns the model's KV cache.
  // null_logits_ok: model->forward accepts logits == nullptr (cache only).
  Drafter(CausalLM* model, LookupOptions lookup, sampling::SamplerParams params, int max_batch,
          bool null_logits_ok = false);
  bool enabled() const { return model_ != nullptr || lookup_.enabled(); }
  bool has_model() const { return model_ != nullptr; }
  // The draft model proposes a whole batch in one pass (PARD).
  bool parallel() const { return mask_ >= 0; }
  CausalLM* model() const { return model_; }
  // The next token after ctx, or nullopt when no source proposes one (lookup
  // without a match and no model, or the draft model's context is full).
  std::optional<Proposal> next(std::span<const int32_t> ctx);
  // Up to k proposals continuing ctx: lookup spans, and the model where
  // lookup has nothing (one pass for the rest of the batch when parallel).
  // With an autoregressive draft this equals calling next() k times.
  std::vector<Proposal> propose(std::span<const int32_t> ctx, int k);
  // Brings the model's cache to ctx minus its last token, so the next call
  // only feeds one token (used to process the prompt ahead of time).
  void prefill(std::span<const int32_t> ctx);
  int64_t model_passes() const { return passes_; }

 private:
  void sync(std::span<const int32_t> ctx, size_t keep_at_most);
  // Feeds tokens; with need_logits the last row lands in logits_.
  void feed(std::span<const int32_t> tokens, bool need_logits);
  Proposal pick(std::span<const float> row, int64_t pos) const;
  std::optional<Proposal> model_next(std::span<const int32_t> ctx);
  // One pass over [ctx.back(), mask x (n - 1)]; the masks leave the cache after it.
  std::vector<Proposal> parallel_next(std::span<const int32_t> ctx, int n);

  CausalLM* model_;
  LookupOptions lookup_;
  SuffixIndex index_;
  int32_t mask_ = -1;  // the parallel draft's mask token, -1 when autoregressive
  sampling::SamplerParams params_;
  int max_batch_;
  bool null_logits_ok_;
  std::vector<int32_t> fed_;  // exactly the tokens in the model's cache
  std::vector<float> logits_;
  int64_t passes_ = 0;
};

}  // namespace epyctune::engine::speculative
