// `epyctune-engine generate|bench --launch-config FILE`: the plan's CPUs for
// each pool (mapped onto this machine's only with --map-cpus, and said so),
// each thread written into its side's resctrl `tasks`, weights and KV cache
// bound to the plan's nodes, and everything read back afterwards: every
// thread's Cpus_allowed_list and group membership, every buffer's nodes from
// numa_maps. A mismatch is an error.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "launch/engine_side.hpp"
#include "launch/launch_config.hpp"

namespace epyctune::engine::placement {

struct LaunchOptions {
  std::string launch_config;                     // the file
  std::string resctrl_root = "/sys/fs/resctrl";  // fixtures point this into their tree
  bool map_cpus = false;                         // map plan CPUs/nodes absent here
  // --shared-weights DIR: weights mapped read-only from a store file there,
  // shared with every instance of the same model on the same nodes.
  std::string shared_weights;
};

// How a model's weights are held, for --json reports: {"store": "private" or
// "shared", "file", "inode", "built", "fs", "page_size", "lock_wait_s",
// "pages", "note"}.
nlohmann::json weights_json(const LlamaModel& m);

class LaunchSetup {
 public:
  // Parses the file and decides CPUs and nodes; throws launch::LaunchConfigError.
  explicit LaunchSetup(LaunchOptions o);

  // The file as written.
  const launch::LaunchPlan& planned() const { return planned_; }
  // The plan as it runs here: each side's CPUs (mapped with --map-cpus), and
  // in `weights` the nodes each model's memory is bound to.
  const launch::LaunchPlan& placed() const { return placed_; }
  // The file has a [spec] partition (else the engine picks CPUs itself).
  bool has_partition() const { return planned_.has_spec; }
  // Model options for one side's weights (numa policy, nodes, hugepages,
  // shared store).
  void apply_memory_policy(ModelOptions& mo, launch::Role side) const;

  // A pool pinned to the side's CPUs whose workers join the side's group.
  std::unique_ptr<runtime::ThreadPool> make_pool(launch::Role side);
  // A pool over both sides' CPUs (the verify side's first), each worker in
  // the group of the side its CPU belongs to: where a partitioned run's
  // target decodes while drafting pauses.
  std::unique_ptr<runtime::ThreadPool> make_every_pool();
  // Hook for a pool's workers: join the side's group, read back the thread.
  runtime::ThreadPool::WorkerStartHook worker_hook(launch::Role side);
  // Worker 0 of a pool is the thread that drives it: pin it (a no-op region)
  // and record it like the workers. Call on that thread.
  void record_driver(launch::Role side, runtime::ThreadPool& pool);
  // Binds the model's KV cache to the side's nodes before it is touched.
  void bind_kv(const LlamaModel& m, launch::Role side);

  // Thread mismatches so far (pinning, group membership); "" when none.
  std::string thread_errors() const { return log_->errors(); }
  // Reads back the memory of the models (after they ran) and collects every
  // thread and memory mismatch; "" when everything is where the plan says.
  std::string check(const LlamaModel& target, const LlamaModel* draft);
  nlohmann::json report() const;
  // One line per fact for text mode (CPU mapping, groups, memory).
  std::vector<std::string> report_lines() const;

 private:
  const std::vector<int>& side_nodes(launch::Role side) const;
  std::string group_of(launch::Role side) const;

  LaunchOptions o_;
  launch::LaunchPlan planned_, placed_;
  std::string node_note_;
  std::shared_ptr<launch::PlacementLog> log_ = std::make_shared<launch::PlacementLog>();
  std::vector<std::string> memory_errors_;
  nlohmann::json memory_ = nlohmann::json::object();
};

}  // namespace epyctune::engine::placement
