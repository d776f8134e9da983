#include "engine/serving/batch_drafter.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/elapsed.hpp"
#include "engine/model/kv_pool.hpp"

namespace epyctune::engine::serving {

BatchDrafter::BatchDrafter(LlamaModel& draft, int slots) : draft_(draft) {
  // The pool is the slots' now, as the target's is BatchDecoder's.
  draft_.truncate(0);
  draft_.kv_pool().set_indexing(true);
  slots_.resize(size_t(std::max(0, slots)));
  for (auto& s : slots_) s.seq = draft_.pooled_sequence();
}

BatchDrafter::~BatchDrafter() = default;

bool BatchDrafter::admit(int slot, std::span<const int32_t> prompt, int64_t positions) {
  release(slot);
  Slot& s = slots_.at(size_t(slot));
  s.positions = std::min<int64_t>(positions, draft_.n_ctx());
  return map(s, prompt);
}

bool BatchDrafter::map(Slot& s, std::span<const int32_t> hist) {
  // The draft reads the whole history and proposes past it: with a shorter
  // context than that it never drafts for this request.
  if (hist.empty() || int64_t(hist.size()) >= s.positions) return false;
  const int reused = s.seq->admit(hist, s.positions);
  if (reused < 0) return false;
  s.admitted = true;
  s.read = size_t(reused);
  return true;
}

void BatchDrafter::release(int slot) {
  Slot& s = slots_.at(size_t(slot));
  s.seq->clear();
  s.admitted = false;
  s.read = s.from = 0;
  s.proposed = 0;
  s.positions = 0;
}

std::vector<std::vector<int32_t>> BatchDrafter::draft(std::span<const Ask> asks, int k) {
  std::vector<std::vector<int32_t>> out(asks.size());
  struct Run {
    size_t ask;
    Slot* s;
    int want;
  };
  std::vector<Run> runs;                          // those drafting this round
  std::vector<std::pair<Slot*, size_t>> reading;  // those reading a chunk only
  std::vector<SeqRow> rows;
  size_t budget = kCatchUp;
  for (size_t i = 0; i < asks.size() && k > 0; ++i) {
    const Ask& a = asks[i];
    Slot& s = slots_.at(size_t(a.slot));
    s.from = a.hist.size();
    s.proposed = 0;
    if (a.hist.empty() || a.room <= 0) continue;
    if (!s.admitted && !map(s, a.hist)) continue;
    // Proposals of a round the target did not verify (their request was
    // given the lookup's, or none) leave the cache.
    if (size_t(s.seq->pos()) > s.read) s.seq->truncate(static_cast<int>(s.read));
    // The history and all but the last proposal go into the draft's cache.
    const int64_t fits = s.positions - int64_t(a.hist.size()) + 1;
    const int want = static_cast<int>(std::min<int64_t>({k, a.room, fits}));
    if (want <= 0) continue;
    const size_t unread = a.hist.size() - 1 - s.read;
    const size_t chunk = std::min(unread, budget);
    for (size_t j = 0; j < chunk; ++j) rows.push_back({s.seq.get(), a.hist[s.read + j], false});
    budget -= chunk;
    if (chunk < unread) {
      if (chunk > 0) reading.emplace_back(&s, chunk);
      continue;
    }
    rows.push_back({s.seq.get(), a.hist.back(), true});
    runs.push_back({i, &s, want});
  }
  if (rows.empty()) return out;
  const size_t nv = size_t(draft_.n_vocab());
  std::vector<float> logits(runs.size() * nv);
  std::vector<size_t> live(runs.size());  // runs with a logits row in this pass
  for (size_t i = 0; i < runs.size(); ++i) live[i] = i;
  try {
    while (!rows.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      draft_.forward_rows(rows, logits.data());
      fit_.observed(static_cast<int>(rows.size()), common::seconds_since(t0));
      rows.clear();
      std::vector<size_t> next;
      for (size_t li = 0; li < live.size(); ++li) {
        Run& r = runs[live[li]];
        const float* row = logits.data() + li * nv;
        const auto tok = static_cast<int32_t>(std::max_element(row, row + nv) - row);
        auto& props = out[r.ask];
        props.push_back(tok);
        if (static_cast<int>(props.size()) < r.want) {
          rows.push_back({r.s->seq.get(), tok, true});
          next.push_back(live[li]);
        }
      }
      live = std::move(next);
    }
  } catch (const std::exception&) {
    // Drafting is best effort: the target's pass goes ahead without
    // proposals, and each sequence goes back to the history it had read.
    for (auto& [s, n] : reading) s->seq->truncate(static_cast<int>(s->read));
    for (const Run& r : runs) r.s->seq->truncate(static_cast<int>(r.s->read));
    for (auto& o : out) o.clear();
    return out;
  }
  for (auto& [s, n] : reading) s->read += n;
  for (const Run& r : runs) {
    r.s->read = r.s->from;
    r.s->proposed = static_cast<int>(out[r.ask].size());
  }
  return out;
}

void BatchDrafter::verified(int slot, int accepted) {
  Slot& s = slots_.at(size_t(slot));
  if (s.proposed == 0) return;
  // The cache holds the history and every proposal but the last: it keeps
  // those the target kept.
  s.read = s.from + size_t(std::clamp(accepted, 0, s.proposed - 1));
  s.seq->truncate(static_cast<int>(s.read));
  s.proposed = 0;
}

}  // namespace epyctune::engine::serving
