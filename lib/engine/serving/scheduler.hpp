// One generation worker and a bounded queue in front of it. The worker is the
// one thread that drives the partition's thread pool. With parallel = 1 it
// runs one completion at a time, with speculative decoding when the engine
// drafts; with parallel = N > 1 it batches up to N completions into each
// forward pass (BatchDecoder: continuous batching, no drafting). Up to
// `capacity` more wait (0: none); a request beyond that is refused at once. The connection that
// owns a job is woken by it as text is generated, and cancels it when its client leaves: a waiting
// job then leaves the queue, a running one stops at the next token. With
// parallel > 1 a job also waits until the model's KV pool can promise every
// block it may need (BatchDecoder::fits), so none that runs is dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/sampling/sampler.hpp"
#include "engine/serving/batch_decoder.hpp"
#include "engine/serving/metrics.hpp"
#include "engine/speculative/speculative.hpp"

namespace epyctune::engine::serving {

class Engine;
class TextStream;

struct JobInput {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  sampling::SamplerParams sampler;
  std::vector<std::string> stop;
  bool ignore_eos = false;
};

class Job {
 public:
  explicit Job(JobInput in) : in_(std::move(in)) {}
  const JobInput& input() const { return in_; }

  // Appends the text generated since the last take to out, without
  // waiting. Returns true once the job has ended and all its text is taken.
  bool take(std::string& out);
  // listener runs (on the generating thread, under the job's lock: it must
  // be quick and take no lock of the job's) after each new text and at the
  // end; at once if something is already there. An empty function removes
  // it: once listen({}) returns, the old one is not running and never runs.
  void listen(std::function<void()> listener);
  bool cancelled() const { return cancelled_.load(); }

  // After wait() returned true:
  std::string finish_reason() const;  // "stop" | "length"; "" when it did not run to an end
  std::string error() const;          // why it failed, "" when it did not
  int64_t completion_tokens() const;

 private:
  friend class Scheduler;
  void emit(std::string text);
  void end(std::string finish_reason, int64_t tokens, std::string error);

  // When it was queued, started, and made its first and last token; the
  // worker alone touches them after submit.
  struct Times {
    using Clock = std::chrono::steady_clock;
    Clock::time_point queued = Clock::now(), started, first, last;
    std::atomic<int64_t> tokens{0};  // read by /slots while the worker counts
    void token();
  };

  JobInput in_;
  Times times_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::function<void()> listener_;
  std::string pending_;
  bool ended_ = false;
  std::string finish_, error_;
  int64_t tokens_ = 0;
};

class Scheduler {
 public:
  enum class Admit { ok, full, stopping };
  struct Ticket {
    Admit admit = Admit::ok;
    std::shared_ptr<Job> job;
  };

  // Starts the worker thread; it calls engine.attach_driver() first (its
  // error, a PlacementMismatch, is rethrown here).
  // prefill_gap: BatchDecoder's (how much a long prompt may slow the
  // decoding requests' steps; 0: not paced).
  Scheduler(Engine& engine, size_t capacity, Metrics& metrics, int parallel = 1,
            double prefill_gap = kDefaultPrefillGap);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Ticket submit(JobInput in);
  // The client left: a waiting job leaves the queue, a running one stops.
  void cancel(const std::shared_ptr<Job>& job);
  // Refuses new jobs, cancels the waiting and running ones, joins the worker.
  void stop();

  size_t capacity() const { return capacity_; }
  // Each slot: what runs there now (parallel 1: the one running job).
  std::vector<SlotState> slots() const;
  int parallel() const { return parallel_; }
  QueueGauges gauges() const;
  // The KV pool after the worker's last step, and the sequences running.
  KvGauges kv() const;
  int active_sequences() const;

 private:
  void worker(std::promise<void>* started);
  void run(const std::shared_ptr<Job>& job);
  void batched_loop();
  // The oldest waiting job when a slot is free and its KV blocks can be
  // promised (idle: nothing runs, so it is taken anyway), moved to running_.
  std::shared_ptr<Job> next_admitted(const BatchDecoder& dec, bool idle);
  void publish_kv();  // kv_ from the model's pool (the one-at-a-time worker)
  // The job leaves running_ (its times to metrics), then ends, waking its
  // client: one that sends its next request at once must find room.
  void finished(const std::shared_ptr<Job>& job, std::string finish_reason, int64_t tokens,
                std::string error);
  // finished() for a completion that ran: cancelled, or its text's tail
  // emitted and "stop" (a stop string or the model's) or "length".
  void completed(const std::shared_ptr<Job>& job, TextStream& text, bool cancelled, bool model_stop,
                 int64_t tokens);

  Engine& engine_;
  const size_t capacity_;
  const int parallel_;
  const double prefill_gap_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;
  std::vector<SlotState> slots_;  // the batched worker's view after each step
  KvGauges kv_;
  bool stopping_ = false;
  std::atomic<bool> abort_{false};
  std::thread thread_;
};

}  // namespace epyctune::engine::serving
