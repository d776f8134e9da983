// Lossless speculative decoding over two CausalLMs (or one plus n-gram lookup).
//
// Invariant between rounds: the target's cache holds every history token but
// the last. A round drafts up to K tokens, runs the target ONCE on
// [last, d1..dK] (K+1 logit rows), keeps the longest prefix the target agrees
// with (greedy: argmax match; sampling: rejection sampling), appends the
// target's own token after it, and truncates the target's cache back to the
// accepted length. Greedy output is token-for-token the target's own; sampled
// output has exactly the target's distribution.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/model/causal_lm.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/adaptive.hpp"
#include "engine/speculative/cost_model.hpp"
#include "engine/speculative/mode_choice.hpp"
#include "engine/speculative/ngram_lookup.hpp"

namespace epyctune::engine::speculative {

enum class SpecMode {
  shared,       // draft and verify alternate on the same CPUs
  partitioned,  // a drafting thread on its own CPUs runs ahead while the target verifies
};
const char* spec_mode_name(SpecMode m);

struct SpecOptions {
  int draft_len = 4;  // K: proposals per verify pass (0 = plain decoding); adaptive: the most
  // Adaptive: K chosen per round (0..draft_len) by an AdaptiveController
  // seeded with `cost`; else every round drafts draft_len.
  bool adaptive = false;
  AdaptiveOptions adaptive_opt;  // its max_k is draft_len
  CostModel cost = default_cost_model();
  // Shortest draft worth a verify pass (llama.cpp's --draft-min): a shorter
  // one is dropped and the target decodes one token alone. Drafts come short
  // near the end of generation (K shrinks to the tokens left: no drafting
  // then) and when the draft model's context is full. 0 <= draft_min <= K.
  int draft_min = 0;
  LookupOptions lookup;  // n-gram lookup (cascade with the draft model when both)
  SpecMode mode = SpecMode::shared;
  // End of generation: stop after emitting a token for which this is true.
  std::function<bool(int32_t)> is_stop;
  int max_batch = 32;  // longest forward() batch when processing the prompt
  // The models accept logits == nullptr in forward() (cache only, no output
  // head), as LlamaModel does: the prompt then skips the vocabulary projection.
  bool null_logits_ok = false;
  // Partitioned mode: runs first on the drafting thread (pin it, bind memory).
  std::function<void()> draft_thread_init;
  // Partitioned adaptive mode: moves both models onto every CPU of both
  // sides (true) or back onto their own sides (false); called between passes
  // on the generating thread. When set, the rounds the controller decodes
  // plain hand the draft's CPUs to the target (the drafting thread pauses),
  // and the first drafting round after them (a probe, which also catches the
  // draft up) runs time-shared on every CPU; drafting runs ahead on its own
  // side again from the round after. cost.handback_plain_s should then be set.
  std::function<void(bool every_cpu)> set_layout;
  // With set_layout: the run picks the layout of its drafting rounds as it
  // goes (LayoutChooser): time-shared on every CPU (costs `layouts->shared`)
  // or drafting ahead on the sides (`layouts->partitioned`, which is then
  // `cost`), starting with the one that wins at layout_accept.
  std::optional<LayoutCosts> layouts;
  double layout_accept = kModeChoiceAccept;
  LayoutFactors layout_factors;  // what earlier runs measured against the predictions
};

struct SpecStats {
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  int64_t target_passes = 0;  // verify passes while generating (prompt excluded)
  int64_t drafted = 0;        // proposals sent to the target
  int64_t accepted = 0;
  int64_t lookup_drafted = 0, lookup_accepted = 0;
  int64_t model_drafted = 0, model_accepted = 0;
  int64_t draft_passes = 0;      // draft model forward() calls (prompt included)
  int64_t discarded = 0;         // proposals computed ahead and thrown away (partitioned)
  int64_t dropped = 0;           // proposals in drafts shorter than draft_min, never verified
  int64_t every_cpu_passes = 0;  // target passes on every CPU while the draft's were handed back
  // SpecOptions::layouts: drafting rounds run time-shared, and the moves
  // between the layouts.
  int64_t shared_rounds = 0;
  int64_t layout_switches = 0;
  LayoutFactors layout_factors;  // at the run's end, for the next run
  double prompt_s = 0.0;         // target prompt processing
  double generate_s = 0.0;       // from the first round to the last token
  double draft_s = 0.0;          // time spent computing proposals
  double verify_s = 0.0;         // target forward + accept decision
  double wait_s = 0.0;           // verifier idle, waiting for proposals
  // Proposals verified in each round, in order (0: a plain pass).
  std::vector<int16_t> k_trace;
  // By position in the draft (index 0 = first proposal): rounds that reached
  // it, and rounds that accepted it.
  std::vector<int64_t> pos_tried, pos_accepted;

  double acceptance_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  // Accepted proposals per target pass (each pass also yields one token of its own).
  double mean_accepted() const {
    return target_passes ? double(accepted) / double(target_passes) : 0.0;
  }
  double tokens_per_second() const { return generate_s > 0 ? double(generated) / generate_s : 0.0; }
};

// Throws std::invalid_argument for a prompt `target` cannot decode from:
// empty, a token outside its vocabulary, or longer than its context.
void check_prompt(const CausalLM& target, std::span<const int32_t> prompt);

// Called for every generated token in order; return false to stop early.
using TokenCallback = std::function<bool(int32_t token)>;

class Generator {
 public:
  // draft may be null (lookup-only or plain decoding). Both models must share
  // the vocabulary; the generator owns their caches while it runs.
  Generator(CausalLM& target, CausalLM* draft, sampling::SamplerParams sampler, SpecOptions opt);
  // Generates up to n_predict tokens after prompt (non-empty), stopping early
  // at a stop token or when the target's context is full. Returns the new tokens.
  std::vector<int32_t> generate(std::span<const int32_t> prompt, int n_predict,
                                const TokenCallback& on_token = {});
  const SpecStats& stats() const { return stats_; }

 private:
  void prefill(std::span<const int32_t> hist);
  int draft_budget(size_t hist_len, int want) const;
  void record_round(size_t n_props, size_t m);

  CausalLM& target_;
  CausalLM* draft_;
  sampling::SamplerParams sp_;
  SpecOptions opt_;
  SpecStats stats_;
  int64_t n_predict_ = 0;
};

}  // namespace epyctune::engine::speculative
