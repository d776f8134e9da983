// The scheduler's worker with parallel > 1: jobs join a BatchDecoder as its
// slots free up and the KV pool can promise their blocks (oldest first: a
// job waits while the one before it does), and every step advances all of
// them by one pass.
#include <map>

#include "engine/serving/batch_decoder.hpp"
#include "engine/serving/engine.hpp"
#include "engine/serving/scheduler.hpp"
#include "engine/serving/text_stream.hpp"

namespace epyctune::engine::serving {

namespace {
// Prompt tokens per pass across the requests still reading their prompts:
// a pass then costs about what a 64-row verify does, so a long prompt delays
// the others' next token by that much, not by its whole prefill.
constexpr int kPrefillBudget = 64;
}  // namespace

void Scheduler::batched_loop() {
  BatchDecoder dec(engine_.target(), parallel_,
                   engine_.batch_options(kPrefillBudget, prefill_gap_));
  auto publish = [&] {
    auto st = dec.states();
    const KvGauges kv = dec.kv();
    std::lock_guard lk(mu_);
    slots_ = std::move(st);
    kv_ = kv;
  };
  publish();
  struct Active {
    std::shared_ptr<Job> job;
    std::unique_ptr<TextStream> text;
  };
  std::map<uint64_t, Active> active;
  const Tokenizer& tok = engine_.tokenizer();

  auto end_job = [&](const SlotResult& r) {
    auto it = active.find(r.id);
    if (it == active.end()) return;
    metrics_.generation(r.stats.prompt_tokens, r.stats);
    metrics_.prompt_reused(r.reused_prompt_tokens);
    // The slot leaves /slots and /metrics before the client, woken when
    // the job ends, can look.
    publish();
    const auto& job = it->second.job;
    completed(job, *it->second.text, r.finish == SlotResult::Finish::cancelled || job->cancelled(),
              r.finish == SlotResult::Finish::stop, r.stats.generated);
    active.erase(it);
  };

  for (;;) {
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
      if (stopping_) break;
    }
    while (std::shared_ptr<Job> job = next_admitted(dec, active.empty())) {
      const JobInput& in = job->input();
      auto text = std::make_unique<TextStream>(in.stop);
      SlotRequest r;
      r.prompt = in.prompt;
      r.n_predict = in.max_tokens;
      r.sampler = in.sampler;
      Job* jp = job.get();
      TextStream* tp = text.get();
      r.on_token = [jp, tp, &tok](int32_t t) {
        if (jp->cancelled()) return false;
        jp->times_.token();
        jp->emit(tp->push(tok.token_to_piece(t)));
        return !tp->stopped();
      };
      if (!in.ignore_eos) r.is_stop = [&tok](int32_t t) { return tok.is_eog(t); };
      r.cancelled = [jp] { return jp->cancelled(); };
      try {
        active[dec.add(std::move(r))] = {job, std::move(text)};
      } catch (const std::exception& e) {
        finished(job, "", 0, e.what());
      }
    }
    publish();
    try {
      for (const auto& r : dec.step()) end_job(r);
    } catch (const std::exception& e) {
      // The pass failed as a whole: every request in it fails with its reason.
      for (const auto& r : dec.fail_all()) {
        auto it = active.find(r.id);
        if (it == active.end()) continue;
        finished(it->second.job, "", r.stats.generated, e.what());
        active.erase(it);
      }
    }
    publish();
  }
  for (const auto& r : dec.fail_all()) end_job(r);
  publish();
}

std::shared_ptr<Job> Scheduler::next_admitted(const BatchDecoder& dec, bool idle) {
  std::lock_guard lk(mu_);
  if (queue_.empty() || !dec.has_room()) return nullptr;
  const JobInput& in = queue_.front()->input();
  SlotRequest probe;
  probe.prompt = in.prompt;
  probe.n_predict = in.max_tokens;
  // Waits while running requests hold the blocks it needs; with none running
  // every block is free or evictable, so add() says why it cannot fit.
  if (!idle && dec.fits(probe) == BatchDecoder::Fit::later) return nullptr;
  auto job = std::move(queue_.front());
  queue_.pop_front();
  running_.push_back(job);
  job->times_.started = Job::Times::Clock::now();
  return job;
}

}  // namespace epyctune::engine::serving
