// The engine as `generate` and `serve` both run it: one loader (CPU plan,
// pools, launch-config placement, target and optional draft model, the
// tokenizer) and one generation call that streams tokens through a callback
// the caller can use to stop it. Speculative decoding (a draft model, n-gram
// lookup, or both) is lossless, so it is on whenever one is configured.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/placement/launch_setup.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/serving/batch_decoder.hpp"
#include "engine/speculative/parallel_draft.hpp"
#include "engine/speculative/partition.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/tokenizer/tokenizer.hpp"

namespace epyctune::engine::serving {

// Parsed and typed: a wrong value throws common::FieldError naming the field
// here, which the app maps back to its flag.
struct EngineConfig {
  std::string model, draft;
  int threads = 0;  // the first N allowed CPUs (0 = all)
  int n_ctx = 0;    // 0 = the model's
  int batch = 64;   // tokens per forward pass over a prompt (1-4096)
  // The target's KV pool (LlamaModel's kv_pool): positions, bytes or whole
  // contexts, the largest wins; and its type (F16, F32, Q8_0).
  int64_t kv_tokens = 0, kv_bytes = 0;
  int kv_contexts = 1;
  GgmlType kv_type = GgmlType::F16;
  // The draft's threads (llama.cpp's -td): the last N of the engine's CPUs
  // are the draft partition, the rest the target's; 0: the engine's split.
  int draft_threads = 0;
  // CPU lists, each checked against the CPUs this process may use; nullopt:
  // not given (cpus: every allowed CPU or the first `threads`).
  std::optional<std::vector<int>> cpus, draft_cpus, verify_cpus;
  int lookup = 0;  // n-gram lookup drafting: longest n-gram (0 = off)
  int lookup_min = 1;
  int draft_max = 16;  // K, or adaptive: the longest K (0 = plain decoding)
  // K chosen per round from acceptance and costs (speculative/adaptive.hpp);
  // false: every round drafts draft_max.
  bool draft_adaptive = true;
  bool cost_cache = true;  // reuse this host's measured pass times (cost_model.hpp)
  int draft_min = 0;
  speculative::ModeRequest spec_mode = speculative::ModeRequest::automatic;
  bool mmap = false;
  // Where the copied weights go; nullopt: each partition's own nodes when
  // partitioned, else first touch.
  std::optional<runtime::NumaPolicy> numa;
  // Only the CPUs on the NUMA node this process runs on at start (llama.cpp's
  // --numa isolate); the weights then go there too unless numa says otherwise.
  bool numa_isolate = false;
  int experts_per_token = 0;        // the target's MoE top-k override (0 = the file's)
  placement::LaunchOptions launch;  // launch_config empty: the engine picks CPUs
};

// The threads or memory are not where the launch config puts them.
struct PlacementMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Load progress of one model file: stage ("copy", "page-in"), bytes.
using LoadProgress = std::function<void(const std::string& path, std::string_view stage,
                                        uint64_t done, uint64_t total)>;

// Every generated token and its bytes (pieces of one UTF-8 character may
// arrive in separate tokens); return false to stop.
using TokenSink = std::function<bool(int32_t token, const std::string& piece)>;

enum class FinishReason {
  stop,    // an end-of-generation token, or the sink asked to stop
  length,  // n_predict tokens, or the context is full
};

struct Completion {
  std::vector<int32_t> tokens;
  speculative::SpecStats stats;
  FinishReason finish = FinishReason::length;
  bool stopped_by_sink = false;
};

class Engine {
 public:
  // Reads the launch config (its [models] fill what cfg leaves empty),
  // validates the options, checks from the GGUF headers that a draft shares
  // the target's vocabulary, and plans the CPUs; loads no weights. Throws
  // common::FieldError naming the field, launch::LaunchConfigError.
  explicit Engine(EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Pools, models (weights placed as the plan says), tokenizer.
  void load(const LoadProgress& progress = {});

  const EngineConfig& config() const { return cfg_; }
  // Where this engine runs: the launch config's plan as placed here, or its
  // own; an empty draft side means a draft alternates on the verify CPUs.
  const launch::LaunchPlan& plan() const { return plan_; }
  bool partitioned() const { return plan_.partitioned(); }
  speculative::SpecMode mode() const {
    return partitioned() ? speculative::SpecMode::partitioned : speculative::SpecMode::shared;
  }
  // A draft model or lookup drafts, and draft_max > 0.
  bool speculative() const;
  int draft_max() const { return speculative() ? cfg_.draft_max : 0; }
  // How a batched server decodes on this engine: the prompt pacing given,
  // and the proposals it verifies beside its decode rows (the n-gram lookup
  // and the draft model, as configured; none with draft_max 0). Call on the
  // driving thread: a partitioned engine that can hand the draft's CPUs to
  // the target puts both models on every CPU from now on, since a batched
  // step runs the draft's passes and the target's one after the other.
  BatchOptions batch_options(int prefill_budget, double prefill_gap);
  // Why this engine's speculation is best run one request at a time by
  // default (after load): a parallel (PARD) draft proposes K tokens in one
  // pass there, and a draft on CPUs of its own that cannot go to the
  // target (a fixed draft length on a partition) would leave half the CPUs
  // idle in every batched pass. "" when batching loses nothing, or when
  // nothing drafts.
  std::string one_at_a_time() const;
  placement::LaunchSetup* launch() const { return launch_.get(); }
  const Tokenizer& tokenizer() const { return *tok_; }
  LlamaModel& target() const { return *target_; }
  LlamaModel* draft() const { return draft_.get(); }
  // What drafts: the parallel (PARD) wrapper when the draft is one, else the draft.
  CausalLM* drafting_model() const;
  int n_ctx() const { return target_->n_ctx(); }
  double load_seconds() const { return load_s_; }
  // Of the load, reading or probing the pass times of the cost model.
  double cost_seconds() const { return cost_s_; }
  // The adaptive controller's starting costs, and where they came from.
  const speculative::CostModel& cost_model() const { return cost_; }
  const std::string& cost_note() const { return cost_note_; }

  // Call once on the thread that will call generate(), before it does:
  // with a launch config it joins the verify side's group and is recorded.
  // Throws PlacementMismatch when a thread is not where the plan puts it.
  void attach_driver();
  // Up to n_predict tokens after prompt, stopping at an end-of-generation
  // token (unless ignore_eog), when the context is full, or when sink
  // returns false. Reuses the models' caches: one call at a time.
  Completion generate(std::span<const int32_t> prompt, int n_predict,
                      const sampling::SamplerParams& sampler, const TokenSink& sink,
                      bool ignore_eog = false);
  // Reads back where every thread and buffer landed; "" when all is where
  // the launch config says (or there is none).
  std::string check_placement();

 private:
  void make_pools();
  // Both models on every CPU of both sides, or each on its own side.
  void set_layout(bool every_cpu);
  void draft_thread_init();
  void measure_costs();

  EngineConfig cfg_;
  launch::LaunchPlan plan_;
  std::unique_ptr<placement::LaunchSetup> launch_;
  std::unique_ptr<runtime::ThreadPool> verify_pool_, draft_pool_;
  // Every CPU of both sides, for the rounds that hand the draft's to the target.
  std::unique_ptr<runtime::ThreadPool> every_pool_;
  bool handback_ = false;  // partitioned and adaptive
  // Auto mode on a partition: each run chooses the layout of its rounds
  // (SpecOptions::layouts) from both layouts' costs, starting from the
  // acceptance the last run saw.
  bool choose_layout_ = false;
  std::optional<speculative::LayoutCosts> layouts_;
  double layout_accept_ = speculative::kModeChoiceAccept;
  speculative::LayoutFactors layout_factors_;
  std::unique_ptr<LlamaModel> target_, draft_;
  std::unique_ptr<speculative::ParallelDraftModel> pard_;  // wraps draft_ when it is PARD-style
  std::unique_ptr<Tokenizer> tok_;
  double load_s_ = 0, cost_s_ = 0;
  speculative::CostModel cost_ = speculative::default_cost_model();
  std::string cost_note_;
  bool draft_recorded_ = false;  // the first drafting thread is in the report
  std::string draft_join_error_;
};

}  // namespace epyctune::engine::serving
