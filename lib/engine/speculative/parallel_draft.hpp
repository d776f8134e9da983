// Parallel drafting in the style of AMD's PARD: a draft model trained to
// read a reserved mask token as "a token I have not seen yet" proposes k
// tokens in ONE forward pass over [.., last, mask x (k-1)]. Row 0 (at the
// last real token) predicts the next token, the row at mask i the token i + 1
// positions further. The masks' cache entries are dropped right after the
// pass (the drafter truncates back to the real context), as PARD's
// inference rolls back its k - 1 mask entries before feeding the accepted
// tokens in the next round.
//
// A draft model is parallel when it carries PARD_MASK_KEY in its GGUF
// metadata (the GGUF counterpart of PARD's `pard_token` config field); the
// loader wraps it in ParallelDraftModel, which is how the Drafter sees it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/model/causal_lm.hpp"

namespace epyctune::engine {
namespace gguf {
class File;
}

namespace speculative {

inline constexpr const char* PARD_MASK_KEY = "pard.mask_token_id";

class ParallelDraft {
 public:
  virtual ~ParallelDraft() = default;
  virtual int32_t mask_token() const = 0;
};

// A CausalLM that is also a parallel draft: forwards everything to inner.
class ParallelDraftModel final : public CausalLM, public ParallelDraft {
 public:
  // Throws std::invalid_argument when mask is not in inner's vocabulary.
  ParallelDraftModel(CausalLM& inner, int32_t mask);
  int n_vocab() const override { return inner_.n_vocab(); }
  int n_ctx() const override { return inner_.n_ctx(); }
  int pos() const override { return inner_.pos(); }
  void forward(std::span<const int32_t> tokens, float* logits) override {
    inner_.forward(tokens, logits);
  }
  void truncate(int pos) override { inner_.truncate(pos); }
  int32_t mask_token() const override { return mask_; }

 private:
  CausalLM& inner_;
  int32_t mask_;
};

// The mask token of a PARD-style draft, or nullopt when f has no PARD_MASK_KEY.
std::optional<int32_t> pard_mask_token(const gguf::File& f);
// Same, but a missing key is an error naming the file and the fix.
int32_t require_pard_mask_token(const gguf::File& f);

}  // namespace speculative
}  // namespace epyctune::engine
