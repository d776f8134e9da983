#include "engine/speculative/parallel_draft.hpp"

#include <stdexcept>
#include <string>

#include "engine/gguf/gguf.hpp"

namespace epyctune::engine::speculative {

ParallelDraftModel::ParallelDraftModel(CausalLM& inner, int32_t mask) : inner_(inner), mask_(mask) {
  if (mask < 0 || mask >= inner.n_vocab())
    throw std::invalid_argument(std::string(PARD_MASK_KEY) + " = " + std::to_string(mask) +
                                " is outside the draft's vocabulary of " +
                                std::to_string(inner.n_vocab()) + " tokens");
}

std::optional<int32_t> pard_mask_token(const gguf::File& f) {
  if (f.find(PARD_MASK_KEY) == nullptr) return std::nullopt;
  const auto v = f.get_uint(PARD_MASK_KEY);
  if (!v || *v > static_cast<uint64_t>(INT32_MAX))
    throw std::runtime_error(f.path() + ": " + PARD_MASK_KEY +
                             " must be an unsigned integer token id");
  return static_cast<int32_t>(*v);
}

int32_t require_pard_mask_token(const gguf::File& f) {
  if (auto m = pard_mask_token(f)) return *m;
  throw std::runtime_error(f.path() + ": no " + PARD_MASK_KEY +
                           " key, so this is not a parallel (PARD) draft; write one with "
                           "`epyctune-mkmodel mkmodel OUT --pair-of TARGET --pard` (the "
                           "dev tool in the build tree)");
}

}  // namespace epyctune::engine::speculative
