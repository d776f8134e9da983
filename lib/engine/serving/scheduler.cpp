#include "engine/serving/scheduler.hpp"

#include <algorithm>

#include "engine/model/kv_pool.hpp"
#include "engine/serving/engine.hpp"
#include "engine/serving/text_stream.hpp"

namespace epyctune::engine::serving {

bool Job::take(std::string& out) {
  std::lock_guard lk(mu_);
  out += pending_;
  pending_.clear();
  return ended_;
}

void Job::listen(std::function<void()> listener) {
  std::lock_guard lk(mu_);
  listener_ = std::move(listener);
  if (listener_ && (ended_ || !pending_.empty())) listener_();
}

std::string Job::finish_reason() const {
  std::lock_guard lk(mu_);
  return finish_;
}

std::string Job::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

int64_t Job::completion_tokens() const {
  std::lock_guard lk(mu_);
  return tokens_;
}

void Job::emit(std::string text) {
  if (text.empty()) return;
  std::lock_guard lk(mu_);
  pending_ += text;
  if (listener_) listener_();
}

void Job::end(std::string finish_reason, int64_t tokens, std::string error) {
  std::lock_guard lk(mu_);
  ended_ = true;
  finish_ = std::move(finish_reason);
  tokens_ = tokens;
  error_ = std::move(error);
  if (listener_) listener_();
}

Scheduler::Scheduler(Engine& engine, size_t capacity, Metrics& metrics, int parallel,
                     double prefill_gap)
    : engine_(engine),
      capacity_(capacity),
      parallel_(std::max(1, parallel)),
      prefill_gap_(prefill_gap),
      metrics_(metrics) {
  std::promise<void> started;
  auto ready = started.get_future();
  thread_ = std::thread([this, &started] { worker(&started); });
  try {
    ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

Scheduler::~Scheduler() {
  stop();
}

Scheduler::Ticket Scheduler::submit(JobInput in) {
  std::lock_guard lk(mu_);
  if (stopping_) return {Admit::stopping, nullptr};
  // Outstanding jobs: the waiting ones and the running ones (a job the
  // worker has not picked up yet waits in the queue, so it counts once).
  if (queue_.size() + running_.size() >= capacity_ + size_t(parallel_))
    return {Admit::full, nullptr};
  auto job = std::make_shared<Job>(std::move(in));
  queue_.push_back(job);
  cv_.notify_all();
  return {Admit::ok, job};
}

void Scheduler::cancel(const std::shared_ptr<Job>& job) {
  job->cancelled_ = true;
  bool dropped = false;
  {
    std::lock_guard lk(mu_);
    auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) {
      queue_.erase(it);
      dropped = true;
    }
  }
  if (dropped) job->end("", 0, "");  // never ran; a running one ends on the worker
}

void Scheduler::stop() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    abort_ = true;
    dropped.swap(queue_);
    for (auto& j : running_) j->cancelled_ = true;
  }
  cv_.notify_all();
  for (auto& j : dropped) {
    j->cancelled_ = true;
    j->end("", 0, "the server is shutting down");
  }
  if (thread_.joinable()) thread_.join();
}

std::vector<SlotState> Scheduler::slots() const {
  std::lock_guard lk(mu_);
  if (parallel_ > 1) return slots_;
  SlotState s;
  if (!running_.empty()) {
    const Job& j = *running_.front();
    s.busy = true;
    s.prompt_tokens = static_cast<int>(j.input().prompt.size());
    s.generated = static_cast<int>(j.times_.tokens.load());
    s.prompt_done = s.generated > 0 ? s.prompt_tokens : 0;
    s.n_predict = j.input().max_tokens;
    s.cached = s.generated > 0 ? s.prompt_tokens + s.generated - 1 : 0;
  }
  return {s};
}

KvGauges Scheduler::kv() const {
  std::lock_guard lk(mu_);
  return kv_;
}

int Scheduler::active_sequences() const {
  std::lock_guard lk(mu_);
  return static_cast<int>(running_.size());
}

void Scheduler::publish_kv() {
  const KvPool& p = engine_.target().kv_pool();
  const KvGauges kv{p.blocks_used(),     p.blocks_cached(),       p.blocks_total(),
                    p.blocks_reserved(), KvPool::kBlockPositions, p.evictions()};
  std::lock_guard lk(mu_);
  kv_ = kv;
}

QueueGauges Scheduler::gauges() const {
  std::lock_guard lk(mu_);
  return {queue_.size(), capacity_, static_cast<int>(running_.size())};
}

void Scheduler::worker(std::promise<void>* started) {
  try {
    engine_.attach_driver();  // this thread drives the pool from now on
  } catch (...) {
    started->set_exception(std::current_exception());
    return;
  }
  started->set_value();
  if (parallel_ > 1) return batched_loop();
  publish_kv();
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(job);
    }
    job->times_.started = Job::Times::Clock::now();
    run(job);
  }
}

void Job::Times::token() {
  last = Clock::now();
  if (tokens++ == 0) first = last;
}

void Scheduler::finished(const std::shared_ptr<Job>& job, std::string finish_reason, int64_t tokens,
                         std::string error) {
  const Job::Times& t = job->times_;
  using Sec = std::chrono::duration<double>;
  if (t.started != Job::Times::Clock::time_point{})
    metrics_.timings(Sec(t.started - t.queued).count(),
                     t.tokens > 0 ? Sec(t.first - t.queued).count() : -1.0,
                     t.tokens > 1 ? Sec(t.last - t.first).count() / double(t.tokens - 1) : -1.0);
  {
    std::lock_guard lk(mu_);
    running_.erase(std::remove(running_.begin(), running_.end(), job), running_.end());
  }
  job->end(std::move(finish_reason), tokens, std::move(error));
}

void Scheduler::completed(const std::shared_ptr<Job>& job, TextStream& text, bool cancelled,
                          bool model_stop, int64_t tokens) {
  if (cancelled) return finished(job, "", tokens, abort_ ? "the server is shutting down" : "");
  job->emit(text.finish());
  finished(job, text.stopped() || model_stop ? "stop" : "length", tokens, "");
}

void Scheduler::run(const std::shared_ptr<Job>& held) {
  Job& job = *held;
  const JobInput& in = job.input();
  TextStream text(in.stop);
  try {
    auto sink = [&](int32_t, const std::string& piece) {
      if (job.cancelled()) return false;
      job.times_.token();
      job.emit(text.push(piece));
      return !text.stopped();
    };
    const Completion c =
        engine_.generate(in.prompt, in.max_tokens, in.sampler, sink, in.ignore_eos);
    metrics_.generation(static_cast<int64_t>(in.prompt.size()), c.stats);
    publish_kv();
    completed(held, text, job.cancelled(), c.finish == FinishReason::stop, c.stats.generated);
  } catch (const std::exception& e) {
    publish_kv();
    finished(held, "", 0, e.what());
  }
}

}  // namespace epyctune::engine::serving
