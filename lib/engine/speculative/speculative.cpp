#include "engine/speculative/speculative.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>

#include "common/elapsed.hpp"
#include "common/field_error.hpp"
#include "engine/speculative/draft_feed.hpp"
#include "engine/speculative/drafter.hpp"
#include "engine/speculative/rejection.hpp"

namespace epyctune::engine::speculative {

namespace {
using Clock = std::chrono::steady_clock;

// One verify pass's verdict: the target keeps the first m proposals, then
// its own token next.
struct Decision {
  size_t m = 0;
  int32_t next = -1;
};

// logits holds props.size() + 1 rows; row i is the target's distribution at
// history position pos0 + i. Greedy: the longest argmax-matching prefix.
// Sampling: rejection sampling, each draw seeded by its position.
Decision decide(const std::vector<float>& logits, int nv, const std::vector<Proposal>& props,
                const sampling::SamplerParams& sp, size_t pos0, std::vector<float>& p,
                std::vector<float>& scratch) {
  auto row = [&](size_t i) {
    return std::span<const float>(logits.data() + i * static_cast<size_t>(nv),
                                  static_cast<size_t>(nv));
  };
  Decision d;
  if (sp.greedy()) {
    while (d.m < props.size() && sampling::argmax(row(d.m)) == props[d.m].token) ++d.m;
    d.next = sampling::argmax(row(d.m));
    return d;
  }
  for (; d.m < props.size(); ++d.m) {
    const auto pos = static_cast<int64_t>(pos0 + d.m);
    sampling::probabilities(row(d.m), sp, p);
    const Verdict v =
        rejection_step(p, props[d.m].q, props[d.m].token,
                       sampling::uniform_at(sp.seed, pos, sampling::Stream::accept),
                       sampling::uniform_at(sp.seed, pos, sampling::Stream::resample), scratch);
    if (!v.accepted) {
      d.next = v.token;
      return d;
    }
  }
  sampling::probabilities(row(d.m), sp, p);
  d.next = sampling::sample_from(p, sampling::uniform_at(sp.seed, static_cast<int64_t>(pos0 + d.m),
                                                         sampling::Stream::target_sample));
  return d;
}

AdaptiveOptions adaptive_options(const SpecOptions& o) {
  AdaptiveOptions ao = o.adaptive_opt;
  ao.max_k = o.draft_len;
  return ao;
}

DraftFeed* feed_of(const std::unique_ptr<PipelinedFeed>& pipe, SharedFeed& shared) {
  return pipe ? static_cast<DraftFeed*>(pipe.get()) : &shared;
}

// The hand-back of a partitioned run (SpecOptions::set_layout): plain rounds
// and the probe after them on every CPU, the other rounds on the sides; with
// the shared layout chosen (SpecOptions::layouts), every round on every CPU.
// Puts the models back on their sides when the run ends, however it ends.
class Layout {
 public:
  Layout(const std::function<void(bool)>& set, PipelinedFeed* pipe, bool adaptive)
      : set_(pipe && adaptive ? set : nullptr), pipe_(pipe) {}
  ~Layout() {
    try {
      restore();
    } catch (...) {  // the run's own exception is the one to report
    }
  }
  bool can_move() const { return set_ != nullptr; }
  bool every_cpu() const { return every_cpu_; }
  void set_shared(bool s) { shared_ = s; }
  // Switches before a round of k proposals; true when the layout changed.
  bool before_round(int k, std::span<const int32_t> hist) {
    const bool want = set_ && (shared_ || k == 0 || prev_k_ == 0);
    prev_k_ = k;
    if (!set_ || want == every_cpu_) return false;
    // The drafting thread is idle before its model moves, and the models
    // are back on their sides before it runs again.
    if (want) pipe_->pause();
    set_(want);
    every_cpu_ = want;
    if (!want) pipe_->resume(hist);
    return true;
  }
  void restore() {
    if (!every_cpu_) return;
    every_cpu_ = false;
    set_(false);
  }

 private:
  std::function<void(bool)> set_;
  PipelinedFeed* pipe_;
  bool every_cpu_ = false;
  bool shared_ = false;
  int prev_k_ = -1;
};

void count_proposals(SpecStats& st, const std::vector<Proposal>& props, size_t m) {
  st.drafted += static_cast<int64_t>(props.size());
  st.accepted += static_cast<int64_t>(m);
  for (size_t i = 0; i < props.size(); ++i) {
    ++(props[i].from_model ? st.model_drafted : st.lookup_drafted);
    if (i < m) ++(props[i].from_model ? st.model_accepted : st.lookup_accepted);
  }
}
}  // namespace

const char* spec_mode_name(SpecMode m) {
  return m == SpecMode::partitioned ? "partitioned" : "shared";
}

Generator::Generator(CausalLM& target, CausalLM* draft, sampling::SamplerParams sampler,
                     SpecOptions opt)
    : target_(target), draft_(draft), sp_(sampler), opt_(std::move(opt)) {
  sp_.validate();
  if (opt_.draft_len < 0) throw common::FieldError("draft_max", "must be >= 0");
  if (opt_.adaptive && opt_.draft_len < 1)
    throw common::FieldError("draft_max", "adaptive drafting needs a longest draft of 1 or more");
  if (opt_.draft_min < 0 || opt_.draft_min > opt_.draft_len)
    throw common::FieldError("draft_min", "must be between 0 and the longest draft");
  if (draft_ && draft_->n_vocab() != target_.n_vocab())
    throw std::invalid_argument("draft model vocabulary (" + std::to_string(draft_->n_vocab()) +
                                ") differs from the target's (" +
                                std::to_string(target_.n_vocab()) + ")");
}

// Every prompt token but the last into the target's cache, in batches of
// max_batch; the last is fed with the first round's proposals.
void Generator::prefill(std::span<const int32_t> hist) {
  const auto t0 = Clock::now();
  target_.truncate(0);
  std::vector<float> logits;
  const size_t nv = static_cast<size_t>(target_.n_vocab());
  const size_t mb = static_cast<size_t>(std::max(1, opt_.max_batch));
  for (size_t off = 0; off + 1 < hist.size(); off += mb) {
    const size_t n = std::min(hist.size() - 1 - off, mb);
    if (!opt_.null_logits_ok) logits.resize(n * nv);
    target_.forward(hist.subspan(off, n), opt_.null_logits_ok ? nullptr : logits.data());
  }
  stats_.prompt_s = common::seconds_since(t0);
}

// Proposals the next round may draft: `want`, but none past the last token
// to generate or the target's context, and none when fewer than draft_min fit.
int Generator::draft_budget(size_t hist_len, int want) const {
  const int64_t remaining = n_predict_ - stats_.generated;
  const int64_t room = static_cast<int64_t>(target_.n_ctx()) - static_cast<int64_t>(hist_len);
  int k = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({want, remaining - 1, room})));
  return k < opt_.draft_min ? 0 : k;
}

void Generator::record_round(size_t n_props, size_t m) {
  stats_.k_trace.push_back(static_cast<int16_t>(n_props));
  for (size_t i = 0; i < n_props && i <= m && i < stats_.pos_tried.size(); ++i) {
    ++stats_.pos_tried[i];
    if (i < m) ++stats_.pos_accepted[i];
  }
}

void check_prompt(const CausalLM& target, std::span<const int32_t> prompt) {
  if (prompt.empty()) throw std::invalid_argument("empty prompt (add a BOS token)");
  const int nv = target.n_vocab();
  for (int32_t t : prompt)
    if (t < 0 || t >= nv)
      throw std::invalid_argument("prompt token " + std::to_string(t) + " outside the vocabulary");
  if (prompt.size() > static_cast<size_t>(target.n_ctx()))
    throw std::invalid_argument("prompt of " + std::to_string(prompt.size()) +
                                " tokens exceeds the context of " + std::to_string(target.n_ctx()));
}

std::vector<int32_t> Generator::generate(std::span<const int32_t> prompt, int n_predict,
                                         const TokenCallback& on_token) {
  check_prompt(target_, prompt);
  const int nv = target_.n_vocab();
  stats_ = {};
  stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
  stats_.pos_tried.assign(static_cast<size_t>(opt_.draft_len), 0);
  stats_.pos_accepted.assign(static_cast<size_t>(opt_.draft_len), 0);
  n_predict_ = n_predict;

  Drafter drafter(opt_.draft_len > 0 ? draft_ : nullptr,
                  opt_.draft_len > 0 ? opt_.lookup : LookupOptions{}, sp_, opt_.max_batch,
                  opt_.null_logits_ok);
  SharedFeed shared(drafter);
  std::unique_ptr<PipelinedFeed> pipe;
  if (opt_.mode == SpecMode::partitioned && drafter.has_model())
    pipe = std::make_unique<PipelinedFeed>(drafter, 2 * opt_.draft_len + 1, opt_.draft_thread_init);
  DraftFeed* feed = feed_of(pipe, shared);
  Layout layout(opt_.set_layout, pipe.get(), opt_.adaptive);
  std::optional<LayoutChooser> chooser;
  if (layout.can_move() && opt_.layouts)
    chooser.emplace(*opt_.layouts, opt_.draft_len, opt_.layout_accept, opt_.layout_factors);
  std::optional<AdaptiveController> ctl;
  if (opt_.adaptive) ctl.emplace(adaptive_options(opt_), chooser ? chooser->current() : opt_.cost);
  if (chooser) layout.set_shared(chooser->shared());

  std::vector<int32_t> hist(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  std::vector<float> logits;

  // Prompt: the draft side starts first so a pipelined drafter processes it
  // concurrently with the target.
  feed->start(hist);
  prefill(hist);

  const auto tgen = Clock::now();
  std::vector<float> p, scratch;
  std::vector<int32_t> batch;
  bool done = n_predict <= 0;
  while (!done) {
    const int64_t room = static_cast<int64_t>(target_.n_ctx()) - static_cast<int64_t>(hist.size());
    if (room < 0) break;  // the last token no longer fits in the target's cache
    const auto t_round = Clock::now();
    const int want = ctl ? ctl->choose() : opt_.draft_len;
    const int k = draft_budget(hist.size(), want);
    // The controller's choice moves the layout, not the budget's cut: the
    // last token's plain round is not worth pausing the drafting thread for.
    if (layout.before_round(want, hist))
      feed = layout.every_cpu() ? &shared : feed_of(pipe, shared);
    // Adaptive: the drafting thread runs about two rounds of this K ahead,
    // not the longest K's: what lies further would mostly be thrown away.
    // Plain rounds stop it.
    if (pipe && ctl) pipe->limit_lookahead(k > 0 ? 2 * k + 2 : 0);
    const double wait0 = feed->wait_seconds();
    std::vector<Proposal> props = feed->take(hist, k);
    if (!props.empty() && static_cast<int>(props.size()) < opt_.draft_min) {
      stats_.dropped += static_cast<int64_t>(props.size());
      props.clear();
    }
    const double wait = feed->wait_seconds() - wait0;

    const auto tv = Clock::now();
    batch.assign(1, hist.back());
    for (const auto& pr : props) batch.push_back(pr.token);
    logits.resize(batch.size() * static_cast<size_t>(nv));
    target_.forward(batch, logits.data());
    ++stats_.target_passes;
    if (layout.every_cpu()) ++stats_.every_cpu_passes;
    if (chooser && chooser->shared() && !props.empty()) ++stats_.shared_rounds;
    const Decision dec = decide(logits, nv, props, sp_, hist.size(), p, scratch);
    const size_t m = dec.m;
    if (m < props.size()) target_.truncate(static_cast<int>(hist.size() + m));
    const double verify = common::seconds_since(tv);
    stats_.verify_s += verify;
    count_proposals(stats_, props, m);
    record_round(props.size(), m);
    if (ctl)
      ctl->observe({static_cast<int>(props.size()), static_cast<int>(m), wait, verify,
                    k > 0 && props.empty(), layout.every_cpu()});
    for (size_t i = 0; i <= m && !done; ++i) {
      const int32_t tok = i < m ? props[i].token : dec.next;
      hist.push_back(tok);
      out.push_back(tok);
      ++stats_.generated;
      const bool keep_going = on_token ? on_token(tok) : true;
      if (!keep_going || (opt_.is_stop && opt_.is_stop(tok)) || stats_.generated >= n_predict)
        done = true;
    }
    if (chooser && chooser->observe_round(ctl->acceptance(), static_cast<int>(m + 1),
                                          common::seconds_since(t_round), !props.empty())) {
      layout.set_shared(chooser->shared());
      ctl->reseed(chooser->current());
    }
    if (!done) feed->committed(hist);
  }
  stats_.layout_factors = chooser ? chooser->factors() : opt_.layout_factors;
  stats_.layout_switches = chooser ? chooser->switches() : 0;
  stats_.generate_s = common::seconds_since(tgen);
  stats_.draft_s = shared.draft_seconds() + (pipe ? pipe->draft_seconds() : 0.0);
  stats_.wait_s = shared.wait_seconds() + (pipe ? pipe->wait_seconds() : 0.0);
  stats_.discarded = pipe ? pipe->discarded() : 0;
  layout.restore();
  pipe.reset();  // joins the drafting thread before its counters are read
  stats_.draft_passes = drafter.model_passes();
  return out;
}

}  // namespace epyctune::engine::speculative
