// A draft model's proposals for the batched server. Each slot's request has
// a sequence in the draft model's own KV pool, holding the request's
// history as far as the draft has read it. A drafting round runs k passes
// of the draft, each over the next token of every request it drafts for
// (the first also over history it had not read, a bounded chunk), and
// proposes each request's greedy continuation for the target to verify
// beside the other rows of its pass. Proposals are only proposals: the
// target keeps a token only where it is the one it draws itself.
//
// The draft's cache is best effort: a request whose blocks the draft pool
// cannot promise is not drafted for, and is never held back for it.
// Single-threaded, as BatchDecoder.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/serving/draft_policy.hpp"

namespace epyctune::engine::serving {

class BatchDrafter {
 public:
  // draft: shares the target's vocabulary (Engine checks it); its pool is
  // the slots' from now on.
  BatchDrafter(LlamaModel& draft, int slots);
  ~BatchDrafter();
  BatchDrafter(const BatchDrafter&) = delete;
  BatchDrafter& operator=(const BatchDrafter&) = delete;

  // The request in `slot` starts: its draft sequence maps the draft pool's
  // blocks holding its prompt's leading full blocks and reserves the rest
  // of `positions` (capped by the draft's context). False when the pool
  // cannot promise them now: admit() is tried again at its next round.
  bool admit(int slot, std::span<const int32_t> prompt, int64_t positions);
  // The request in `slot` ended: its blocks go back to the draft pool.
  void release(int slot);

  struct Ask {
    int slot = 0;
    std::span<const int32_t> hist;  // the request's tokens so far
    int room = 0;                   // proposals it can take at most
  };
  // Up to k proposals for each ask, in order (none for one whose history
  // the draft has not read up to a chunk of it: it reads that chunk now and
  // drafts at a later round).
  std::vector<std::vector<int32_t>> draft(std::span<const Ask> asks, int k);
  // After the target verified slot's proposals of the last round:
  // `accepted` of them were kept.
  void verified(int slot, int accepted);
  // The draft's passes: rows, seconds.
  const PassFit& passes() const { return fit_; }
  // History rows a round reads at most, across its requests, before
  // drafting: a long prompt's worth would stall every decoding request.
  static constexpr int kCatchUp = 32;

 private:
  struct Slot {
    std::unique_ptr<Sequence> seq;
    bool admitted = false;
    int64_t positions = 0;  // what admit() asked for
    size_t read = 0;        // history tokens in the draft's cache
    size_t from = 0;        // the history's length at the last round
    int proposed = 0;       // and its proposals
  };
  // Maps the pool's blocks holding hist's leading full blocks into s's
  // empty sequence and reserves the rest of s.positions; false when the
  // draft's context is too short for it or the pool cannot promise them.
  bool map(Slot& s, std::span<const int32_t> hist);
  LlamaModel& draft_;
  std::vector<Slot> slots_;
  PassFit fit_;
};

}  // namespace epyctune::engine::serving
