#include "engine/serving/batch_decoder.hpp"

#include <chrono>
#include <optional>
#include <stdexcept>

#include "common/elapsed.hpp"

namespace epyctune::engine::serving {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

struct BatchDecoder::Slot {
  std::unique_ptr<Sequence> seq;
  bool busy = false;
  uint64_t id = 0;
  SlotRequest req;
  std::optional<sampling::Sampler> sampler;
  // prompt + generated; its last token is the next row once the prompt is in.
  std::vector<int32_t> hist;
  size_t fed = 0;  // prompt tokens in the cache
  // Prompt tokens found in the cache when the request came (prefix reuse).
  // After the request, hist[0, seq->pos()) is what the cache holds.
  int64_t reused = 0;
  uint64_t used = 0;  // the last request's id: least recently used first
  std::vector<int32_t> out;
  speculative::SpecStats stats;
  Clock::time_point start, gen_start;
  // As Generator: every prompt token but the last is prefill; the last one
  // is the first decode row, whose logits give the first new token.
  bool decoding() const { return fed + 1 >= req.prompt.size(); }
};

BatchDecoder::BatchDecoder(LlamaModel& model, int slots, int prefill_budget)
    : model_(model), budget_(std::max(1, prefill_budget)) {
  if (slots < 1) throw std::invalid_argument("BatchDecoder: at least one slot");
  for (int i = 0; i < slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->seq = model_.new_sequence();
  }
}

BatchDecoder::~BatchDecoder() = default;

int BatchDecoder::active() const {
  int n = 0;
  for (const auto& s : slots_) n += s->busy ? 1 : 0;
  return n;
}

uint64_t BatchDecoder::add(SlotRequest r) {
  speculative::check_prompt(model_, r.prompt);
  // The free slot whose cache holds the longest prefix of this prompt (the
  // least recently used among equals): those positions are kept, and only
  // the rest of the prompt is computed. At least the last prompt token is
  // fed again, for the logits of the first new token.
  Slot* best = nullptr;
  size_t best_common = 0;
  for (auto& sp : slots_) {
    if (sp->busy) continue;
    const size_t cached = std::min(sp->hist.size(), size_t(sp->seq->pos()));
    size_t common = 0;
    while (common < cached && common + 1 < r.prompt.size() && sp->hist[common] == r.prompt[common])
      ++common;
    if (!best || common > best_common || (common == best_common && sp->used < best->used)) {
      best = sp.get();
      best_common = common;
    }
  }
  if (!best) throw std::logic_error("BatchDecoder::add: every slot is busy");
  Slot& s = *best;
  s.busy = true;
  s.id = next_id_++;
  s.used = s.id;
  s.seq->truncate(static_cast<int>(best_common));
  s.sampler.emplace(r.sampler);
  s.hist = r.prompt;
  s.fed = best_common;
  s.out.clear();
  s.stats = {};
  s.stats.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  s.reused = static_cast<int64_t>(best_common);
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
  return r;
}

std::vector<SlotState> BatchDecoder::states() const {
  std::vector<SlotState> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = *slots_[i];
    SlotState st;
    st.slot = static_cast<int>(i);
    st.cached = s.seq->pos();
    if (s.busy) {
      st.busy = true;
      st.id = s.id;
      st.prompt_tokens = static_cast<int>(s.req.prompt.size());
      st.prompt_done = s.decoding() ? st.prompt_tokens : static_cast<int>(s.fed);
      st.generated = static_cast<int>(s.out.size());
      st.n_predict = s.req.n_predict;
    }
    out.push_back(st);
  }
  return out;
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
  size_t budget = size_t(budget_);
  for (Slot* s : waiting) {
    const size_t n = std::min(budget, s->req.prompt.size() - 1 - s->fed);
    if (n == 0) break;
    for (size_t i = 0; i < n; ++i) rows.push_back({s->seq.get(), s->req.prompt[s->fed + i], false});
    prefills.emplace_back(s, n);
    budget -= n;
  }
  if (rows.empty()) return done;

  const size_t nv = size_t(model_.n_vocab());
  std::vector<float> logits(decoders.size() * nv);
  model_.forward_rows(rows, logits.data());
  for (auto [s, n] : prefills) {
    s->fed += n;
    if (s->decoding()) {
      s->stats.prompt_s = common::seconds_since(s->start);
      s->gen_start = Clock::now();
    }
  }
  for (size_t i = 0; i < decoders.size(); ++i) {
    Slot& s = *decoders[i];
    std::span<const float> row(logits.data() + i * nv, nv);
    const int32_t tok = s.sampler->sample(row, static_cast<int64_t>(s.hist.size()));
    s.hist.push_back(tok);
    s.out.push_back(tok);
    ++s.stats.generated;
    ++s.stats.target_passes;
    const bool keep = s.req.on_token ? s.req.on_token(tok) : true;
    if (!keep || (s.req.is_stop && s.req.is_stop(tok)))
      done.push_back(finish(s, SlotResult::Finish::stop));
    else if (s.stats.generated >= s.req.n_predict)
      done.push_back(finish(s, SlotResult::Finish::length));
  }
  return done;
}

}  // namespace epyctune::engine::serving
