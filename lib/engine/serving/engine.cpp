#include "engine/serving/engine.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "common/cpulist.hpp"
#include "common/field_error.hpp"
#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/kv_pool.hpp"
#include "engine/model/llama_config.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/speculative/mode_choice.hpp"
#include "launch/engine_side.hpp"
#include "launch/launch_config.hpp"

namespace epyctune::engine::serving {
namespace {

using Clock = std::chrono::steady_clock;

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

// Proposals a run must have verified for its acceptance to seed the next's layout.
constexpr int64_t kAcceptEvidence = 16;

void check_allowed(const std::optional<std::vector<int>>& cpus, const char* field) {
  if (!cpus) return;
  if (auto why = runtime::unusable_cpus(*cpus); !why.empty()) throw common::FieldError(field, why);
}

// The CPU list or thread count bounds everything; partitions come from it.
// numa_isolate keeps those on the node this thread runs on now.
std::vector<int> engine_cpus(const EngineConfig& c) {
  if (!c.numa_isolate) return c.cpus ? *c.cpus : runtime::first_cpus(c.threads);
  int node = 0;
  std::vector<int> out =
      runtime::cpus_on_this_node(c.cpus ? *c.cpus : runtime::allowed_cpus(), node);
  if (out.empty())
    throw common::FieldError("numa", "isolate: none of the CPUs is on node " +
                                         std::to_string(node) + ", where this process runs");
  if (c.threads > 0 && static_cast<size_t>(c.threads) < out.size()) out.resize(c.threads);
  return out;
}

// draft_threads: the last N CPUs draft, the rest verify.
void split_by_draft_threads(const EngineConfig& c, speculative::PartitionRequest& in) {
  using common::FieldError;
  const int n = c.draft_threads;
  if (n == 0) return;
  if (!in.has_draft_model)
    throw FieldError("draft_threads", "sets the draft model's threads, and there is none");
  if (c.draft_cpus || c.verify_cpus)
    throw FieldError("draft_threads", "the draft and verify CPU lists split the CPUs already");
  if (c.spec_mode == speculative::ModeRequest::shared)
    throw FieldError("draft_threads",
                     "gives the draft CPUs of its own: the shared mode runs it on the target's");
  if (static_cast<size_t>(n) >= in.cpus.size())
    throw FieldError("draft_threads", std::to_string(n) + " of the " +
                                          std::to_string(in.cpus.size()) +
                                          " CPUs would leave none to the target");
  in.draft_cpus = std::vector<int>(in.cpus.end() - n, in.cpus.end());
}

// No launch config: the engine's own partition, from this machine's L3
// domains; in auto mode, load() settles shared or partitioned from the
// measured costs of both.
launch::LaunchPlan own_partition(const EngineConfig& c) {
  for (auto [v, f] :
       {std::pair{&c.cpus, "cpus"}, {&c.draft_cpus, "draft_cpus"}, {&c.verify_cpus, "verify_cpus"}})
    check_allowed(*v, f);
  speculative::PartitionRequest in;
  in.request = c.spec_mode;
  in.has_draft_model = has_draft_model(c);
  in.cpus = engine_cpus(c);
  in.l3_ids = runtime::l3_ids(in.cpus);
  in.draft_cpus = c.draft_cpus;
  in.verify_cpus = c.verify_cpus;
  split_by_draft_threads(c, in);
  if (in.has_draft_model)
    in.draft_share =
        speculative::draft_share(file_bytes(c.model), file_bytes(c.draft),
                                 c.draft_adaptive ? std::min(kSplitK, c.draft_max) : c.draft_max);
  return speculative::pick_partition(in);
}

// A launch config's partition, as placed on this machine, replaces the
// engine's own; without a draft model, or with one CPU for both sides, a
// draft alternates with the target on the verify CPUs.
launch::LaunchPlan launch_partition(const EngineConfig& c, const placement::LaunchSetup& l) {
  if (c.cpus || c.threads > 0 || c.draft_cpus || c.verify_cpus || c.draft_threads > 0 ||
      c.numa_isolate || c.spec_mode != speculative::ModeRequest::automatic)
    throw common::FieldError("launch_config",
                             "sets the CPUs: drop the options that set CPUs, threads or the "
                             "speculative mode");
  launch::LaunchPlan p = l.placed();
  const std::string from = "launch config " + c.launch.launch_config;
  if (!has_draft_model(c)) {
    p.draft = launch::Side{launch::Role::draft};
    p.reason = from + ": the target on the verify CPUs";
  } else if (!p.partitioned()) {
    p.draft = launch::Side{launch::Role::draft};
    p.reason = from + ": one CPU here, draft and target alternate on it";
  } else {
    p.reason = from + ": draft and target each on their own CPUs";
  }
  return p;
}

// The launch config's [models] fill what the command line leaves out.
void take_launch_models(EngineConfig& c, const placement::LaunchSetup& l) {
  const auto& p = l.planned();
  if (!p.has_models) return;
  if (c.model.empty()) c.model = p.models.target;
  if (c.draft.empty()) c.draft = p.models.draft;
  if (c.lookup == 0) c.lookup = p.models.lookup;
}

void validate(const EngineConfig& c) {
  using common::FieldError;
  if (c.lookup < 0) throw FieldError("lookup", "must be >= 0 (0 = off)");
  if (c.draft_max < 0) throw FieldError("draft_max", "must be >= 0 (0 = no drafting)");
  if (c.draft_min < 0 || c.draft_min > c.draft_max)
    throw FieldError("draft_min", "must be between 0 and the longest draft (" +
                                      std::to_string(c.draft_max) + ")");
  if (c.n_ctx < 0) throw FieldError("n_ctx", "must be >= 0 (0 = the model's)");
  if (c.batch < 1 || c.batch > 4096) throw FieldError("batch", "must be 1 to 4096 tokens");
  if (c.draft_threads < 0)
    throw FieldError("draft_threads", "must be >= 0 (0 = the engine's split)");
  if (c.mmap && c.numa && *c.numa != runtime::NumaPolicy::none)
    throw FieldError("numa",
                     "places copied weights: with mmap they stay where the page cache has them");
}

// A draft proposes the target's token ids, so it must have the target's
// vocabulary. The GGUF headers say so before any weight is read: a wrong
// pair fails at once instead of after the target has loaded.
void check_same_vocabulary(const std::string& target, const std::string& draft) {
  const auto t = gguf::File::open(target);
  const auto d = gguf::File::open(draft);
  const int nt = read_llama_config(*t).n_vocab, nd = read_llama_config(*d).n_vocab;
  const auto mt = t->get_string("tokenizer.ggml.model"), md = d->get_string("tokenizer.ggml.model");
  std::string why;
  if (nt != nd)
    why = std::to_string(nd) + " tokens against the target's " + std::to_string(nt);
  else if (mt && md && *mt != *md)
    why = "a " + *md + " tokenizer against the target's " + *mt;
  if (!why.empty())
    throw common::FieldError("draft", draft + " does not share the vocabulary of the target " +
                                          target + " (" + why +
                                          "): a draft must come from the target's family");
}

}  // namespace

Engine::Engine(EngineConfig cfg) : cfg_(std::move(cfg)) {
  if (!cfg_.launch.launch_config.empty()) {
    launch_ = std::make_unique<placement::LaunchSetup>(cfg_.launch);
    take_launch_models(cfg_, *launch_);
  }
  if (cfg_.model.empty())
    throw common::FieldError("model", "required (or a launch config with [models] target)");
  validate(cfg_);
  if (launch_ && cfg_.mmap)
    throw common::FieldError("mmap",
                             "keeps the weights where the file is: it cannot follow the launch "
                             "config's placement");
  if (launch_ && cfg_.numa)
    throw common::FieldError("numa", "the launch config places the weights");
  if (has_draft_model(cfg_)) check_same_vocabulary(cfg_.model, cfg_.draft);
  const bool planned = launch_ && launch_->has_partition();
  plan_ = planned ? launch_partition(cfg_, *launch_) : own_partition(cfg_);
  // Drafting adaptively on a partition: the controller may stop drafting,
  // and the draft's CPUs then go to the target. In auto mode each run also
  // moves its drafting rounds between time-sharing every CPU and the
  // partition, as the acceptance it sees makes the one or the other faster.
  handback_ = partitioned() && cfg_.draft_adaptive;
  choose_layout_ = handback_ && cfg_.spec_mode == speculative::ModeRequest::automatic &&
                   !cfg_.draft_cpus && !cfg_.verify_cpus && cfg_.draft_threads == 0;
}

Engine::~Engine() = default;

bool Engine::speculative() const {
  return (has_draft_model(cfg_) || cfg_.lookup > 0) && cfg_.draft_max > 0;
}

BatchOptions Engine::batch_options(int prefill_budget, double prefill_gap) {
  if (every_pool_) set_layout(true);
  BatchOptions o;
  o.prefill_budget = prefill_budget;
  o.prefill_gap = prefill_gap;
  if (cfg_.draft_max <= 0) return o;
  if (cfg_.lookup > 0) o.lookup = {cfg_.lookup, cfg_.lookup_min};
  o.draft = draft_.get();
  o.max_drafts = std::min(o.max_drafts, cfg_.draft_max);
  return o;
}

std::string Engine::one_at_a_time() const {
  if (!speculative()) return "";
  if (pard_) return "a parallel (PARD) draft drafts a whole run in one pass one request at a time";
  if (draft_ && partitioned() && !every_pool_)
    return "the draft keeps CPUs of its own (a fixed --draft-max on a partition): one request "
           "at a time, its passes overlap the target's";
  return "";
}

void Engine::make_pools() {
  const bool planned = launch_ && launch_->has_partition();
  auto pool = [&](launch::Role r) {
    return planned ? launch_->make_pool(r)
                   : std::make_unique<runtime::ThreadPool>(plan_.side(r).cpus);
  };
  verify_pool_ = pool(launch::Role::verify);
  if (partitioned()) draft_pool_ = pool(launch::Role::draft);
  if (handback_) {
    // The verify side's CPUs first: the thread that drives the target is
    // worker 0 of both of its pools, pinned to the same CPU.
    if (planned) {
      every_pool_ = launch_->make_every_pool();
    } else {
      std::vector<int> every = plan_.verify.cpus;
      every.insert(every.end(), plan_.draft.cpus.begin(), plan_.draft.cpus.end());
      every_pool_ = std::make_unique<runtime::ThreadPool>(std::move(every));
    }
  }
}

void Engine::set_layout(bool every_cpu) {
  target_->set_pool(every_cpu ? *every_pool_ : *verify_pool_);
  if (draft_) draft_->set_pool(every_cpu ? *every_pool_ : *draft_pool_);
}

void Engine::load(const LoadProgress& progress) {
  make_pools();
  // Partitioned: each model's weights are copied onto the NUMA nodes of its
  // own partition's CPUs, so the draft's traffic stays off the target's memory.
  ModelOptions mo;
  mo.n_ctx = cfg_.n_ctx;
  mo.kv_type = cfg_.kv_type;
  mo.max_batch = cfg_.batch;
  mo.shared_weights = cfg_.launch.shared_weights;
  if (cfg_.numa)
    mo.numa = *cfg_.numa;
  else if (partitioned() || cfg_.numa_isolate)
    mo.numa = runtime::NumaPolicy::local;
  if (cfg_.mmap) {
    mo.copy_weights = false;
    mo.numa = runtime::NumaPolicy::none;
  }
  ModelOptions mo_draft = mo;
  mo.kv_tokens = cfg_.kv_tokens;  // the target's pool; the draft's mirrors its positions below
  mo.kv_bytes = cfg_.kv_bytes;
  mo.kv_contexts = cfg_.kv_contexts;
  mo.experts_per_token = cfg_.experts_per_token;  // the target's: a draft is usually dense
  if (launch_) {
    launch_->apply_memory_policy(mo, launch::Role::verify);
    launch_->apply_memory_policy(mo_draft, launch::Role::draft);
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
    // As many positions as the target's pool, so that a batched server
    // can draft for every request it holds (mapped, not touched: unused
    // positions cost address space only).
    mo_draft.kv_tokens = target_->kv_pool().blocks_total() * KvPool::kBlockPositions;
    draft_ = LlamaModel::load(cfg_.draft, partitioned() ? *draft_pool_ : *verify_pool_, mo_draft);
    // A PARD-style draft (mask token in its metadata) drafts a batch per pass.
    if (auto mask = speculative::pard_mask_token(draft_->file()))
      pard_ = std::make_unique<speculative::ParallelDraftModel>(*draft_, *mask);
  }
  if (launch_) {
    launch_->bind_kv(*target_, launch::Role::verify);
    if (draft_)
      launch_->bind_kv(*draft_, partitioned() ? launch::Role::draft : launch::Role::verify);
  }
  tok_ = Tokenizer::from_gguf(target_->file());
  if (speculative() && cfg_.draft_adaptive) {
    const auto t_cost = Clock::now();
    measure_costs();
    cost_s_ = std::chrono::duration<double>(Clock::now() - t_cost).count();
  }
  load_s_ = std::chrono::duration<double>(Clock::now() - t_load).count();
}

// The adaptive controller's seed: the target's pass time per batch size and
// the draft's single-token pass, cached per model file, CPUs and ISA (a
// first run probes them in a second or two: cost_model.hpp). With a
// hand-back, also the plain pass on every CPU; in auto mode, both layouts
// whole, for each run to choose between.
void Engine::measure_costs() {
  const std::string isa = kernels::isa_name(kernels::active_isa());
  const int k1 = cfg_.draft_max + 1;
  std::string note;
  auto layout = [&](runtime::ThreadPool& tpool, runtime::ThreadPool& dpool, int target_tokens,
                    bool with_draft, const char* what) {
    speculative::CostModel c;
    auto key = [&](const std::string& path, const runtime::ThreadPool& p) {
      return speculative::cost_cache_key(path, common::format_cpulist(p.cpus()), isa);
    };
    c.target = speculative::cached_pass_times(*target_, key(cfg_.model, tpool), target_tokens,
                                              cfg_.cost_cache, &note);
    cost_note_ += (cost_note_.empty() ? "" : "; ") + std::string(what) + "target: " + note;
    if (draft_ && with_draft) {
      const bool parallel = pard_ != nullptr;
      const int n = speculative::CostModel::draft_tokens_to_time(parallel, cfg_.draft_max);
      c.set_draft_times(speculative::cached_pass_times(*draft_, key(cfg_.draft, dpool), n,
                                                       cfg_.cost_cache, &note),
                        parallel);
      cost_note_ += "; " + std::string(what) + "draft: " + note;
    }
    c.measured = true;
    return c;
  };
  cost_note_.clear();
  cost_ = layout(*verify_pool_, partitioned() ? *draft_pool_ : *verify_pool_, k1, true, "");
  cost_.overlap = partitioned();
  if (!handback_) return;
  set_layout(true);
  const auto every =
      layout(*every_pool_, *every_pool_, choose_layout_ ? k1 : 1, choose_layout_, "every CPU, ");
  set_layout(false);
  cost_.handback_plain_s = every.target.at(1);
  if (!choose_layout_) return;
  layouts_ = speculative::LayoutCosts{every, cost_};
  const auto d = speculative::choose_mode(*layouts_, cfg_.draft_max);
  plan_.reason +=
      "; auto: each run drafts time-shared on every CPU or on the partition, "
      "whichever its acceptance makes faster (" +
      d.reason + ")";
}

CausalLM* Engine::drafting_model() const {
  if (pard_) return pard_.get();
  return draft_.get();
}

void Engine::attach_driver() {
  if (!launch_ || !launch_->has_partition()) return;
  // The threads that drive each pool join its group like the workers did.
  launch_->record_driver(launch::Role::verify, *verify_pool_);
  if (auto e = launch_->thread_errors(); !e.empty())
    throw PlacementMismatch("threads are not where the launch config puts them:\n" + e);
}

// Partitioned decoding drafts on a fresh thread per generate() call. The
// first is recorded in the launch report; later ones are pinned and joined
// the same way without growing the report on every request.
void Engine::draft_thread_init() {
  if (!draft_recorded_) {
    launch_->record_driver(launch::Role::draft, *draft_pool_);
    draft_recorded_ = true;
    return;
  }
  draft_pool_->run([](int) {});  // pins this thread as the pool's worker 0
  const auto& group = launch_->planned().draft.group;
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
  so.mode = mode();
  so.null_logits_ok = true;  // LlamaModel::forward documents logits == nullptr
  so.max_batch = cfg_.batch;
  if (!ignore_eog) so.is_stop = [this](int32_t t) { return tok_->is_eog(t); };
  if (launch_ && launch_->has_partition() && partitioned())
    so.draft_thread_init = [this] { draft_thread_init(); };
  if (handback_ && so.adaptive) so.set_layout = [this](bool every) { set_layout(every); };
  if (layouts_ && so.adaptive) {
    so.layouts = layouts_;
    so.layout_accept = layout_accept_;
    so.layout_factors = layout_factors_;
  }
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
  // The next run starts in the layout this draft's acceptance favoured.
  if (c.stats.drafted >= kAcceptEvidence) layout_accept_ = c.stats.acceptance_rate();
  if (layouts_) layout_factors_ = c.stats.layout_factors;
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
