#include "engine/serving/engine.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "common/cpulist.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/speculative/mode_choice.hpp"
#include "launch/engine_side.hpp"
#include "launch/launch_config.hpp"

namespace epyctune::engine::serving {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<std::vector<int>> cpus_opt(const std::string& s, const char* flag) {
  if (s.empty()) return std::nullopt;
  try {
    return runtime::parse_cpus(s);
  } catch (const std::invalid_argument& e) {
    // parse_cpus names --cpus; say which flag really was wrong.
    throw std::invalid_argument(std::string(flag) + ": " + e.what());
  }
}

bool has_draft_model(const EngineConfig& c) {
  return !c.draft.empty() && c.draft_max > 0;
}

uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// The K the partition split is sized for: the adaptive controller moves K
// from round to round while the split is fixed for the run, so a middling one.
constexpr int kSplitK = 4;

speculative::CpuPlan plan_own_cpus(const EngineConfig& c) {
  speculative::CpuPlanInput in;
  in.request = speculative::parse_mode_request(c.spec_mode);
  in.has_draft_model = has_draft_model(c);
  // --cpus or --threads bound everything; partitions come from the plan.
  in.cpus = !c.cpus.empty() ? *cpus_opt(c.cpus, "--cpus") : runtime::first_cpus(c.threads);
  in.l3_ids = speculative::read_l3_ids("/", in.cpus);
  in.draft_cpus = cpus_opt(c.draft_cpus, "--draft-cpus");
  in.verify_cpus = cpus_opt(c.verify_cpus, "--verify-cpus");
  if (in.has_draft_model)
    in.draft_share =
        speculative::draft_share(file_bytes(c.model), file_bytes(c.draft),
                                 c.draft_adaptive ? std::min(kSplitK, c.draft_max) : c.draft_max);
  auto plan = speculative::plan_cpus(in);
  if (in.request != speculative::ModeRequest::automatic || in.draft_cpus || in.verify_cpus ||
      !c.draft_adaptive || !c.cost_cache)
    return plan;
  return speculative::choose_mode(
      {plan, c.model, c.draft, kernels::isa_name(kernels::active_isa()), c.draft_max});
}

// A launch config's partition replaces the engine's own CPU picker.
speculative::CpuPlan plan_from_launch(const EngineConfig& c, const placement::LaunchSetup& l) {
  if (!c.cpus.empty() || c.threads > 0 || !c.draft_cpus.empty() || !c.verify_cpus.empty() ||
      c.spec_mode != "auto")
    throw std::invalid_argument(
        "--launch-config sets the CPUs: drop --cpus/--threads/--draft-cpus/--verify-cpus/"
        "--spec-mode");
  speculative::CpuPlan p;
  const std::string from = "launch config " + c.launch.launch_config;
  if (!has_draft_model(c)) {
    p.shared_cpus = l.verify_cpus();
    p.reason = from + ": the target on the verify CPUs";
  } else if (l.draft_cpus() == l.verify_cpus()) {
    p.shared_cpus = l.verify_cpus();
    p.reason = from + ": one CPU here, draft and target alternate on it";
  } else {
    p.mode = speculative::SpecMode::partitioned;
    p.draft_cpus = l.draft_cpus();
    p.verify_cpus = l.verify_cpus();
    p.reason = from + ": draft and target each on their own CPUs";
  }
  return p;
}

// The launch config's [models] fill what the command line leaves out.
void take_launch_models(EngineConfig& c, const placement::LaunchSetup& l) {
  const auto& p = l.plan();
  if (!p.has_models) return;
  if (c.model.empty()) c.model = p.models.target;
  if (c.draft.empty()) c.draft = p.models.draft;
  if (c.lookup == 0) c.lookup = p.models.lookup;
}

void validate(const EngineConfig& c) {
  if (c.lookup < 0) throw std::invalid_argument("--lookup: must be >= 0 (0 = off)");
  if (c.draft_max < 0) throw std::invalid_argument("--draft-max: must be >= 0 (0 = no drafting)");
  if (c.draft_min < 0 || c.draft_min > c.draft_max)
    throw std::invalid_argument("--draft-min: must be between 0 and --draft-max (" +
                                std::to_string(c.draft_max) + ")");
  if (c.n_ctx < 0) throw std::invalid_argument("--ctx: must be >= 0 (0 = the model's)");
}

}  // namespace

Engine::Engine(EngineConfig cfg) : cfg_(std::move(cfg)) {
  if (!cfg_.launch.launch_config.empty()) {
    launch_ = std::make_unique<placement::LaunchSetup>(cfg_.launch);
    take_launch_models(cfg_, *launch_);
  }
  if (cfg_.model.empty())
    throw std::invalid_argument("--model: required (or a launch config with [models] target)");
  validate(cfg_);
  if (launch_ && cfg_.mmap)
    throw std::invalid_argument(
        "--mmap keeps the weights where the file is: it cannot follow "
        "the launch config's placement");
  plan_ =
      launch_ && launch_->has_partition() ? plan_from_launch(cfg_, *launch_) : plan_own_cpus(cfg_);
}

Engine::~Engine() = default;

bool Engine::speculative() const {
  return (has_draft_model(cfg_) || cfg_.lookup > 0) && cfg_.draft_max > 0;
}

void Engine::make_pools() {
  const bool planned = launch_ && launch_->has_partition();
  if (partitioned()) {
    verify_pool_ = planned ? launch_->make_pool("verify")
                           : std::make_unique<runtime::ThreadPool>(plan_.verify_cpus);
    draft_pool_ = planned ? launch_->make_pool("draft")
                          : std::make_unique<runtime::ThreadPool>(plan_.draft_cpus);
  } else {
    verify_pool_ = planned ? launch_->make_pool("verify")
                           : std::make_unique<runtime::ThreadPool>(plan_.shared_cpus);
  }
}

void Engine::load(const LoadProgress& progress) {
  make_pools();
  // Partitioned: each model's weights are copied onto the NUMA nodes of its
  // own partition's CPUs, so the draft's traffic stays off the target's memory.
  ModelOptions mo;
  mo.n_ctx = cfg_.n_ctx;
  mo.shared_weights = cfg_.launch.shared_weights;
  if (partitioned()) mo.numa = runtime::NumaPolicy::local;
  if (cfg_.mmap) {
    mo.copy_weights = false;
    mo.numa = runtime::NumaPolicy::none;
  }
  ModelOptions mo_draft = mo;
  mo.experts_per_token = cfg_.experts_per_token;  // the target's: a draft is usually dense
  if (launch_) {
    launch_->apply_memory_policy(mo, false);
    launch_->apply_memory_policy(mo_draft, true);
  }
  const auto t_load = Clock::now();
  auto report = [&progress](const std::string& path) -> runtime::ProgressFn {
    if (!progress) return {};
    return [&progress, path](std::string_view stage, uint64_t done, uint64_t total) {
      progress(path, stage, done, total);
    };
  };
  mo.progress = report(cfg_.model);
  target_ = LlamaModel::load(cfg_.model, *verify_pool_, mo);
  if (has_draft_model(cfg_)) {
    mo_draft.progress = report(cfg_.draft);
    draft_ = LlamaModel::load(cfg_.draft, partitioned() ? *draft_pool_ : *verify_pool_, mo_draft);
    // A PARD-style draft (mask token in its metadata) drafts a batch per pass.
    if (auto mask = speculative::pard_mask_token(draft_->file()))
      pard_ = std::make_unique<speculative::ParallelDraftModel>(*draft_, *mask);
  }
  if (launch_) {
    launch_->bind_kv(*target_, false);
    if (draft_) launch_->bind_kv(*draft_, partitioned());
  }
  tok_ = Tokenizer::from_gguf(target_->file());
  if (speculative() && cfg_.draft_adaptive) measure_costs();
  load_s_ = std::chrono::duration<double>(Clock::now() - t_load).count();
}

// The adaptive controller's seed: the target's pass time per batch size and
// the draft's single-token pass, cached per model file, CPUs and ISA.
void Engine::measure_costs() {
  const std::string isa = kernels::isa_name(kernels::active_isa());
  auto key = [&](const std::string& path, const runtime::ThreadPool& pool) {
    return speculative::cost_cache_key(path, common::format_cpulist(pool.cpus()), isa);
  };
  std::string note;
  cost_.target = speculative::cached_pass_times(*target_, key(cfg_.model, *verify_pool_),
                                                cfg_.draft_max + 1, cfg_.cost_cache, &note);
  cost_note_ = "target: " + note;
  cost_.draft_s = 0.0;  // lookup costs next to nothing
  if (draft_) {
    const auto& pool = partitioned() ? *draft_pool_ : *verify_pool_;
    const bool parallel = pard_ != nullptr;
    const int n = speculative::CostModel::draft_tokens_to_time(parallel, cfg_.draft_max);
    cost_.set_draft_times(
        speculative::cached_pass_times(*draft_, key(cfg_.draft, pool), n, cfg_.cost_cache, &note),
        parallel);
    cost_note_ += "; draft: " + note;
  }
  cost_.overlap = partitioned();
  cost_.measured = true;
}

CausalLM* Engine::drafting_model() const {
  if (pard_) return pard_.get();
  return draft_.get();
}

void Engine::attach_driver() {
  if (!launch_ || !launch_->has_partition()) return;
  // The threads that drive each pool join its group like the workers did.
  launch_->record_driver("verify", *verify_pool_);
  if (auto e = launch_->thread_errors(); !e.empty())
    throw PlacementMismatch("threads are not where the launch config puts them:\n" + e);
}

// Partitioned decoding drafts on a fresh thread per generate() call. The
// first is recorded in the launch report; later ones are pinned and joined
// the same way without growing the report on every request.
void Engine::draft_thread_init() {
  if (!draft_recorded_) {
    launch_->record_driver("draft", *draft_pool_);
    draft_recorded_ = true;
    return;
  }
  draft_pool_->run([](int) {});  // pins this thread as the pool's worker 0
  const auto& group = launch_->plan().draft.resctrl_group;
  if (group.empty()) return;
  try {
    launch::join_resctrl_group(cfg_.launch.resctrl_root, group, launch::current_tid());
  } catch (const std::exception& e) {
    draft_join_error_ = e.what();
  }
}

Completion Engine::generate(std::span<const int32_t> prompt, int n_predict,
                            const sampling::SamplerParams& sampler, const TokenSink& sink,
                            bool ignore_eog) {
  speculative::SpecOptions so;
  const bool spec = speculative();
  so.draft_len = spec ? cfg_.draft_max : 0;
  so.draft_min = spec ? cfg_.draft_min : 0;
  so.adaptive = spec && cfg_.draft_adaptive;
  so.cost = cost_;
  so.lookup = {cfg_.lookup, cfg_.lookup_min};
  so.mode = plan_.mode;
  so.null_logits_ok = true;  // LlamaModel::forward documents logits == nullptr
  so.max_batch = 64;
  if (!ignore_eog) so.is_stop = [this](int32_t t) { return tok_->is_eog(t); };
  if (launch_ && launch_->has_partition() && partitioned())
    so.draft_thread_init = [this] { draft_thread_init(); };
  speculative::Generator gen(*target_, drafting_model(), sampler, so);

  Completion c;
  bool eog = false;
  c.tokens = gen.generate(prompt, n_predict, [&](int32_t t) {
    eog = !ignore_eog && tok_->is_eog(t);
    if (sink && !sink(t, tok_->token_to_piece(t))) {
      c.stopped_by_sink = true;
      return false;
    }
    return true;
  });
  c.stats = gen.stats();
  c.finish = eog || c.stopped_by_sink ? FinishReason::stop : FinishReason::length;
  return c;
}

std::string Engine::check_placement() {
  std::string out = launch_ ? launch_->check(*target_, draft_.get()) : "";
  if (!draft_join_error_.empty())
    out += (out.empty() ? "" : "\n") + ("drafting thread: " + draft_join_error_);
  return out;
}

}  // namespace epyctune::engine::serving
