#include "engine/speculative/drafter.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/speculative/parallel_draft.hpp"

namespace epyctune::engine::speculative {

Drafter::Drafter(CausalLM* model, LookupOptions lookup, sampling::SamplerParams params,
                 int max_batch, bool null_logits_ok)
    : model_(model),
      lookup_(lookup),
      index_(lookup),
      params_(params),
      max_batch_(std::max(1, max_batch)),
      null_logits_ok_(null_logits_ok) {
  if (model_ && model_->pos() != 0) model_->truncate(0);
  if (const auto* pd = dynamic_cast<const ParallelDraft*>(model_)) mask_ = pd->mask_token();
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
  index_.sync(ctx);
  if (!model_ || ctx.size() < 2) return;
  const size_t upto = std::min(ctx.size() - 1, static_cast<size_t>(model_->n_ctx()));
  sync(ctx, upto);
  feed(ctx.subspan(fed_.size(), upto - fed_.size()), false);
}

Proposal Drafter::pick(std::span<const float> row, int64_t pos) const {
  Proposal p;
  p.from_model = true;
  if (params_.greedy()) {
    p.token = sampling::argmax(row);
  } else {
    sampling::probabilities(row, params_, p.q);
    p.token = sampling::sample_from(
        p.q, sampling::uniform_at(params_.seed, pos, sampling::Stream::draft_sample));
  }
  return p;
}

std::optional<Proposal> Drafter::model_next(std::span<const int32_t> ctx) {
  if (!model_ || ctx.size() > static_cast<size_t>(model_->n_ctx())) return std::nullopt;
  // Keep at most ctx.size() - 1 cached tokens so at least one is fed and its
  // logits row predicts the next position.
  sync(ctx, ctx.size() - 1);
  feed(ctx.subspan(fed_.size()), true);
  const size_t nv = static_cast<size_t>(model_->n_vocab());
  const size_t rows = logits_.size() / nv;
  return pick(std::span<const float>(logits_.data() + (rows - 1) * nv, nv),
              static_cast<int64_t>(ctx.size()));
}

std::vector<Proposal> Drafter::parallel_next(std::span<const int32_t> ctx, int n) {
  // The masks need room in the draft's cache too; fewer when it is nearly full.
  const int64_t room = static_cast<int64_t>(model_->n_ctx()) - static_cast<int64_t>(ctx.size());
  n = static_cast<int>(std::min<int64_t>(n, room + 1));
  if (n <= 0) return {};
  sync(ctx, ctx.size() - 1);
  // The tokens accepted since the last round ride in the same pass as the
  // masks (as PARD feeds them); only a long uncached stretch goes first.
  size_t from = fed_.size();
  if (ctx.size() - from + static_cast<size_t>(n) - 1 > static_cast<size_t>(max_batch_)) {
    feed(ctx.subspan(from, ctx.size() - 1 - from), false);
    from = fed_.size();
  }
  std::vector<int32_t> batch(ctx.begin() + static_cast<std::ptrdiff_t>(from), ctx.end());
  const size_t row0 = batch.size() - 1;  // the row at ctx's last token
  batch.resize(batch.size() + static_cast<size_t>(n) - 1, mask_);
  const size_t nv = static_cast<size_t>(model_->n_vocab());
  logits_.resize(batch.size() * nv);
  model_->forward(batch, logits_.data());
  ++passes_;
  // Roll the masks back out: only real tokens stay cached between rounds.
  model_->truncate(static_cast<int>(ctx.size()));
  fed_.insert(fed_.end(), ctx.begin() + static_cast<std::ptrdiff_t>(from), ctx.end());
  std::vector<Proposal> out;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i)
    out.push_back(pick(std::span<const float>(logits_.data() + (row0 + i) * nv, nv),
                       static_cast<int64_t>(ctx.size() + i)));
  return out;
}

std::optional<Proposal> Drafter::next(std::span<const int32_t> ctx) {
  auto v = propose(ctx, 1);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::vector<Proposal> Drafter::propose(std::span<const int32_t> ctx, int k) {
  std::vector<Proposal> out;
  if (ctx.empty() || k <= 0) return out;
  std::vector<int32_t> c(ctx.begin(), ctx.end());
  while (static_cast<int>(out.size()) < k) {
    const int want = k - static_cast<int>(out.size());
    index_.sync(c);
    std::vector<Proposal> got;
    for (int32_t t : index_.continuation(want)) got.push_back(Proposal{t, false, {}});
    if (got.empty() && model_) {
      if (parallel())
        got = parallel_next(c, want);
      else if (auto p = model_next(c))
        got.push_back(std::move(*p));
    }
    if (got.empty()) break;
    for (auto& p : got) {
      c.push_back(p.token);
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace epyctune::engine::speculative
