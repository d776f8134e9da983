#include "engine/speculative/drafter.hpp"

#include <algorithm>
#include <stdexcept>

namespace epyctune::engine::speculative {

Drafter::Drafter(CausalLM* model, LookupOptions lookup, sampling::SamplerParams params,
                 int max_batch, bool null_logits_ok)
    : model_(model),
      lookup_(lookup),
      params_(params),
      max_batch_(std::max(1, max_batch)),
      null_logits_ok_(null_logits_ok) {
  if (model_ && model_->pos() != 0) model_->truncate(0);
}

void Drafter::sync(std::span<const int32_t> ctx, size_t keep_at_most) {
  size_t common = 0;
  const size_t lim = std::min({fed_.size(), ctx.size(), keep_at_most});
  while (common < lim && fed_[common] == ctx[common]) ++common;
  if (common < fed_.size()) {
    model_->truncate(static_cast<int>(common));
    fed_.resize(common);
  }
}

void Drafter::feed(std::span<const int32_t> tokens, bool need_logits) {
  const int nv = model_->n_vocab();
  for (size_t off = 0; off < tokens.size(); off += static_cast<size_t>(max_batch_)) {
    const size_t n = std::min(tokens.size() - off, static_cast<size_t>(max_batch_));
    const bool skip = null_logits_ok_ && !(need_logits && off + n == tokens.size());
    if (!skip) logits_.resize(n * static_cast<size_t>(nv));
    model_->forward(tokens.subspan(off, n), skip ? nullptr : logits_.data());
    ++passes_;
    fed_.insert(fed_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(off),
                tokens.begin() + static_cast<std::ptrdiff_t>(off + n));
  }
  if (model_->pos() != static_cast<int>(fed_.size()))
    throw std::logic_error("draft model position disagrees with the tokens fed to it");
}

void Drafter::prefill(std::span<const int32_t> ctx) {
  if (!model_ || ctx.size() < 2) return;
  const size_t upto = std::min(ctx.size() - 1, static_cast<size_t>(model_->n_ctx()));
  sync(ctx, upto);
  feed(ctx.subspan(fed_.size(), upto - fed_.size()), false);
}

std::optional<Proposal> Drafter::next(std::span<const int32_t> ctx) {
  if (ctx.empty()) return std::nullopt;
  if (auto t = ngram_lookup(ctx, lookup_)) return Proposal{*t, false, {}};
  if (!model_ || ctx.size() > static_cast<size_t>(model_->n_ctx())) return std::nullopt;
  // Keep at most ctx.size() - 1 cached tokens so at least one is fed and its
  // logits row predicts the next position.
  sync(ctx, ctx.size() - 1);
  feed(ctx.subspan(fed_.size()), true);
  const int nv = model_->n_vocab();
  const size_t rows = logits_.size() / static_cast<size_t>(nv);
  std::span<const float> row(logits_.data() + (rows - 1) * static_cast<size_t>(nv),
                             static_cast<size_t>(nv));
  Proposal p;
  p.from_model = true;
  if (params_.greedy()) {
    p.token = sampling::argmax(row);
  } else {
    sampling::probabilities(row, params_, p.q);
    p.token = sampling::sample_from(
        p.q, sampling::uniform_at(params_.seed, static_cast<int64_t>(ctx.size()),
                                  sampling::Stream::draft_sample));
  }
  return p;
}

}  // namespace epyctune::engine::speculative
