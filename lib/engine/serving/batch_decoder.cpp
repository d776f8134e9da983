#include "engine/serving/batch_decoder.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/elapsed.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/kv_pool.hpp"
#include "engine/speculative/suffix_index.hpp"

namespace epyctune::engine::serving {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

struct BatchDecoder::Slot {
  int n = 0;  // its place in slots_
  std::unique_ptr<Sequence> seq;
  bool busy = false;
  uint64_t id = 0;
  SlotRequest req;
  std::optional<sampling::Sampler> sampler;
  // prompt + generated; its last token is the next row once the prompt is in.
  std::vector<int32_t> hist;
  size_t fed = 0;      // prompt tokens in the cache
  int64_t reused = 0;  // prompt tokens found in the pool when the request came
  std::vector<int32_t> out;
  speculative::SpecStats stats;
  Clock::time_point start, gen_start;
  // The n-gram index over hist (with lookup on), this step's proposals,
  // and the rate its proposals are accepted.
  std::optional<speculative::SuffixIndex> index;
  std::vector<int32_t> drafts;
  bool drafted = false;  // the drafts are the draft model's
  double accept = DraftPolicy::kPriorAccept;
  // As Generator: every prompt token but the last is prefill; the last one
  // is the first decode row, whose logits give the first new token.
  bool decoding() const { return fed + 1 >= req.prompt.size(); }
};

BatchDecoder::BatchDecoder(LlamaModel& model, int slots, const BatchOptions& opts)
    : model_(model),
      pacer_(opts.prefill_budget, opts.prefill_gap),
      lookup_(opts.lookup),
      max_drafts_(std::max(0, opts.max_drafts)) {
  if (slots < 1) throw std::invalid_argument("BatchDecoder: at least one slot");
  if (opts.draft && max_drafts_ > 0) drafter_ = std::make_unique<BatchDrafter>(*opts.draft, slots);
  // The pool is the slots' now: the default sequence gives its blocks back.
  model_.truncate(0);
  model_.kv_pool().set_indexing(true);
  for (int i = 0; i < slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->n = i;
    slots_.back()->seq = model_.pooled_sequence();
  }
}

BatchDecoder::~BatchDecoder() = default;

int BatchDecoder::active() const {
  int n = 0;
  for (const auto& s : slots_) n += s->busy ? 1 : 0;
  return n;
}

int64_t BatchDecoder::positions(const SlotRequest& r) const {
  const int64_t want = int64_t(r.prompt.size()) + std::max(0, r.n_predict);
  return std::min<int64_t>(want, model_.n_ctx());
}

BatchDecoder::Fit BatchDecoder::fits(const SlotRequest& r) const {
  const KvPool& pool = model_.kv_pool();
  const int64_t shared =
      r.prompt.empty() ? 0 : int64_t(r.prompt.size() - 1) / KvPool::kBlockPositions;
  const auto a = pool.plan(r.prompt, shared, positions(r));
  return !a.ever ? Fit::never : a.fits ? Fit::now : Fit::later;
}

uint64_t BatchDecoder::add(SlotRequest r) {
  speculative::check_prompt(model_, r.prompt);
  if (!has_room()) throw std::logic_error("BatchDecoder::add: every slot is busy");
  if (fits(r) == Fit::never)
    throw std::invalid_argument(
        "the request needs " + std::to_string(KvPool::blocks_for(positions(r))) +
        " KV blocks; the pool has " + std::to_string(model_.kv_pool().blocks_total()));
  Slot* free = nullptr;
  for (auto& sp : slots_)
    if (!sp->busy) {
      free = sp.get();
      break;
    }
  Slot& s = *free;
  // Maps the prompt's leading blocks the pool holds (any slot's) and reserves
  // the rest: at least the last prompt token is fed again, for the logits of
  // the first new token.
  const int reused = s.seq->admit(r.prompt, positions(r));
  if (reused < 0) throw std::logic_error("BatchDecoder::add: the KV pool cannot hold it now");
  s.busy = true;
  s.id = next_id_++;
  s.sampler.emplace(r.sampler);
  s.hist = r.prompt;
  s.fed = size_t(reused);
  s.out.clear();
  s.stats = {};
  s.index.reset();
  if (lookup_.enabled()) s.index.emplace(lookup_);
  s.drafts.clear();
  s.drafted = false;
  s.accept = DraftPolicy::kPriorAccept;
  // Best effort: a request the draft's pool cannot hold now is drafted for
  // once it can.
  if (drafter_) drafter_->admit(s.n, r.prompt, positions(r));
  s.stats.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  s.reused = reused;
  s.start = s.gen_start = Clock::now();
  s.req = std::move(r);
  return s.id;
}

SlotResult BatchDecoder::finish(Slot& s, SlotResult::Finish f) {
  SlotResult r;
  r.id = s.id;
  r.finish = f;
  r.tokens = std::move(s.out);
  r.stats = s.stats;
  r.reused_prompt_tokens = s.reused;
  if (s.decoding()) r.stats.generate_s = common::seconds_since(s.gen_start);
  s.busy = false;
  s.req = {};  // drops the request's callbacks (and what they hold) now
  s.out.clear();
  // Its blocks go back to the pool: the full ones stay cached for reuse.
  s.seq->clear();
  if (drafter_) drafter_->release(s.n);
  return r;
}

std::vector<SlotState> BatchDecoder::states() const {
  std::vector<SlotState> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = *slots_[i];
    SlotState st;
    st.slot = static_cast<int>(i);
    st.cached = s.seq->pos();
    st.blocks = s.seq->kv().table();
    st.reserved = s.seq->kv().reserved();
    if (s.busy) {
      st.busy = true;
      st.id = s.id;
      st.prompt_tokens = static_cast<int>(s.req.prompt.size());
      st.prompt_done = s.decoding() ? st.prompt_tokens : static_cast<int>(s.fed);
      st.generated = static_cast<int>(s.out.size());
      st.n_predict = s.req.n_predict;
      st.drafted = s.stats.drafted;
      st.accepted = s.stats.accepted;
    }
    out.push_back(st);
  }
  return out;
}

KvGauges BatchDecoder::kv() const {
  const KvPool& p = model_.kv_pool();
  return {p.blocks_used(),     p.blocks_cached(),       p.blocks_total(),
          p.blocks_reserved(), KvPool::kBlockPositions, p.evictions()};
}

std::vector<SlotResult> BatchDecoder::fail_all() {
  std::vector<SlotResult> out;
  for (auto& s : slots_)
    if (s->busy) out.push_back(finish(*s, SlotResult::Finish::cancelled));
  return out;
}

std::vector<SlotResult> BatchDecoder::step() {
  std::vector<SlotResult> done;
  std::vector<SeqRow> rows;
  std::vector<Slot*> decoders;
  std::vector<std::pair<Slot*, size_t>> prefills;  // slot, tokens fed this step
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (!s.busy) continue;
    if (s.req.cancelled && s.req.cancelled()) {
      done.push_back(finish(s, SlotResult::Finish::cancelled));
      continue;
    }
    if (!s.decoding()) continue;
    // Generator stops when the last token no longer fits in the cache.
    if (s.req.n_predict <= 0 || s.seq->pos() + 1 > model_.n_ctx()) {
      done.push_back(finish(s, SlotResult::Finish::length));
      continue;
    }
    rows.push_back({s.seq.get(), s.hist.back(), true});
    decoders.push_back(&s);
  }
  // Prompt chunks, oldest request first, up to the budget.
  std::vector<Slot*> waiting;
  for (auto& sp : slots_)
    if (sp->busy && !sp->decoding()) waiting.push_back(sp.get());
  std::sort(waiting.begin(), waiting.end(), [](Slot* a, Slot* b) { return a->id < b->id; });
  const int n_decoding = static_cast<int>(decoders.size());
  size_t budget = size_t(pacer_.chunk(n_decoding));
  for (Slot* s : waiting) {
    const size_t n = std::min(budget, s->req.prompt.size() - 1 - s->fed);
    if (n == 0) break;
    for (size_t i = 0; i < n; ++i) rows.push_back({s->seq.get(), s->req.prompt[s->fed + i], false});
    prefills.emplace_back(s, n);
    budget -= n;
  }
  if (rows.empty()) return done;
  const int n_prompt = static_cast<int>(rows.size() - decoders.size());
  // Proposals only while no prompt waits: the pacer models a pass as decode
  // rows plus prompt rows, and the passes it asks for without prompt rows
  // time the decode rows alone (with proposals in them it would never get
  // that timing, and would hold the prompt back for good).
  const int n_drafts = waiting.empty() ? propose(decoders, rows) : 0;

  const size_t nv = size_t(model_.n_vocab());
  std::vector<float> logits((decoders.size() + size_t(n_drafts)) * nv);
  const auto t0 = Clock::now();
  model_.forward_rows(rows, logits.data());
  const double pass_s = common::seconds_since(t0);
  if (n_drafts == 0) pacer_.observed(n_decoding, n_prompt, pass_s);
  if (lookup_.enabled() || drafter_) drafting_.observed(static_cast<int>(rows.size()), pass_s);
  for (auto [s, n] : prefills) {
    s->fed += n;
    if (s->decoding()) {
      s->stats.prompt_s = common::seconds_since(s->start);
      s->gen_start = Clock::now();
    }
  }
  // Each decoder's logits rows: its last token's, then one per proposal.
  size_t at = 0;
  for (Slot* sp : decoders) {
    Slot& s = *sp;
    ++s.stats.target_passes;
    const int p = s.seq->pos() - 1 - static_cast<int>(s.drafts.size());  // its last token's
    size_t j = 0;                                                        // proposals accepted
    std::optional<SlotResult::Finish> end;
    for (;;) {
      std::span<const float> row(logits.data() + (at + j) * nv, nv);
      const int32_t tok = s.sampler->sample(row, static_cast<int64_t>(s.hist.size()));
      s.hist.push_back(tok);
      s.out.push_back(tok);
      ++s.stats.generated;
      const bool keep = s.req.on_token ? s.req.on_token(tok) : true;
      if (!keep || (s.req.is_stop && s.req.is_stop(tok)))
        end = SlotResult::Finish::stop;
      else if (s.stats.generated >= s.req.n_predict)
        end = SlotResult::Finish::length;
      // The proposal's row saw exactly this context: its logits give the
      // next token as a pass of its own would.
      if (end || j == s.drafts.size() || tok != s.drafts[j]) break;
      ++j;
    }
    at += 1 + s.drafts.size();
    if (!s.drafts.empty()) {
      const int verified = static_cast<int>(std::min(j + 1, s.drafts.size()));
      s.accept = DraftPolicy::updated(s.accept, verified, static_cast<int>(j));
      const auto n = static_cast<int64_t>(s.drafts.size()), kept = static_cast<int64_t>(j);
      s.stats.drafted += n;
      s.stats.accepted += kept;
      (s.drafted ? s.stats.model_drafted : s.stats.lookup_drafted) += n;
      (s.drafted ? s.stats.model_accepted : s.stats.lookup_accepted) += kept;
      if (s.drafted) drafter_->verified(s.n, static_cast<int>(j));
      s.drafts.clear();
    }
    if (end) {
      done.push_back(finish(s, *end));
      continue;
    }
    // The cache keeps the last token and the accepted proposals.
    s.seq->truncate(p + 1 + static_cast<int>(j));
  }
  return done;
}

int64_t BatchDecoder::room(const Slot& s) const {
  // The proposals and the token after them within n_predict, the positions
  // reserved for the request and the context.
  const int pos = s.seq->pos();  // the last token's, in this pass
  return std::max<int64_t>(0, std::min<int64_t>({int64_t(s.req.n_predict) - s.stats.generated - 1,
                                                 positions(s.req) - 1 - pos,
                                                 int64_t(model_.n_ctx()) - 1 - pos, max_drafts_}));
}

std::vector<BatchDecoder::Slot*> BatchDecoder::look_up(const std::vector<Slot*>& decoders) {
  const int n_decoding = static_cast<int>(decoders.size());
  std::vector<Slot*> none;
  for (Slot* sp : decoders) {
    Slot& s = *sp;
    s.drafts.clear();
    s.drafted = false;
    if (lookup_.enabled()) {
      // The index follows hist by appending what the last pass added.
      s.index->sync(s.hist);
      s.drafts = s.index->continuation(static_cast<int>(room(s)));
      const int worth =
          drafting_.rows_worth(static_cast<int>(s.drafts.size()), s.accept, n_decoding);
      // A request whose proposals stopped paying drifts back toward the
      // prior, so that a later stretch of repeated text is tried again.
      if (worth == 0 && !s.drafts.empty()) s.accept = DraftPolicy::declined(s.accept);
      s.drafts.resize(size_t(worth));
    }
    if (s.drafts.empty()) none.push_back(&s);
  }
  return none;
}

void BatchDecoder::draft(const std::vector<Slot*>& asked, int rows, int decoding) {
  std::vector<BatchDrafter::Ask> asks;
  std::vector<double> accept;
  std::vector<int> rooms;
  for (Slot* s : asked) {
    asks.push_back({s->n, s->hist, static_cast<int>(room(*s))});
    accept.push_back(s->accept);
    rooms.push_back(asks.back().room);
  }
  const int k = drafting_.draft_len(accept, rooms, rows, decoding, drafter_->passes());
  if (k == 0) {
    for (Slot* s : asked) s->accept = DraftPolicy::declined(s->accept);
    return;
  }
  auto props = drafter_->draft(asks, k);
  for (size_t i = 0; i < asked.size(); ++i) {
    // Only the target's vocabulary can be verified: Engine checks that its
    // draft shares it, but a BatchDecoder takes any draft model.
    auto& p = props[i];
    const auto bad =
        std::find_if(p.begin(), p.end(), [&](int32_t t) { return t >= model_.n_vocab(); });
    p.erase(bad, p.end());
    asked[i]->drafts = std::move(p);
    asked[i]->drafted = !asked[i]->drafts.empty();
  }
}

int BatchDecoder::propose(const std::vector<Slot*>& decoders, std::vector<SeqRow>& rows) {
  if (!lookup_.enabled() && !drafter_) return 0;
  const int n_decoding = static_cast<int>(decoders.size());
  const std::vector<Slot*> asked = look_up(decoders);
  if (drafter_ && !asked.empty()) {
    int looked = 0;
    for (Slot* s : decoders) looked += static_cast<int>(s->drafts.size());
    draft(asked, static_cast<int>(rows.size()) + looked, n_decoding);
  }
  // Decode rows first, each decoder's proposals right after its own row:
  // a sequence's rows are consecutive and in position order.
  std::vector<SeqRow> out;
  int n = 0;
  for (size_t i = 0; i < decoders.size(); ++i) {
    Slot& s = *decoders[i];
    out.push_back(rows[i]);
    for (int32_t d : s.drafts) out.push_back({s.seq.get(), d, true});
    n += static_cast<int>(s.drafts.size());
  }
  out.insert(out.end(), rows.begin() + n_decoding, rows.end());
  rows = std::move(out);
  return n;
}

}  // namespace epyctune::engine::serving
