// `mkmodel --margin G`: synthetic weights whose greedy choices win by a clear
// margin, so that two correct engines, which round differently (q8_0
// activations, summation order), still pick the same token at every step, and
// a reference comparison that finds a difference has found a bug.
//
// The body of the model stays mkmodel's seeded random weights, so every
// component (attention, rope, norms, biases, experts) shapes the hidden state
// as before and a deliberate bug still changes the output. Two things are
// planted on top:
//
// - Routing (mixture-of-experts models). Each token belongs to one of a few
//   groups; its embedding carries its group's direction, and each layer's
//   router rows carry, for every group, the directions of a set of top-k
//   experts, so the k-th and (k+1)-th router logits stand about router_gap
//   apart for every token, whatever the context. The random part of the
//   router is kept (logit std ~1), so the weights among the selected experts
//   still depend on the context.
// - The output head. After the model is written, it is decoded greedily on
//   the given prompts; where the best token leads the runner-up by less than
//   G x (the logits' standard deviation), that token's head row is raised
//   exactly at those steps and left unchanged at every other step (a
//   minimum-norm correction in the span of the head's rows, solved from the
//   steps' logits), and the rows are rewritten in place. This repeats until
//   every step clears the margin, as measured through the engine on the
//   quantised file. The margin is planted for these prompts only: on other
//   prompts the gaps are the random model's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/synth/mkmodel.hpp"

namespace epyctune::engine {
class LlamaModel;
namespace runtime {
class ThreadPool;
}

struct MarginOptions {
  // The smallest top-1 minus top-2 logit gap to plant, in units of the
  // standard deviation of the logits over the vocabulary and steps.
  double token_margin = 0.25;
  // The router logit gap between a token's k experts and the rest. The
  // planting is scaled until the smallest gap measured through the engine
  // is at least half of this (the residual dilutes it differently per
  // architecture).
  double router_gap = 8.0;
  std::vector<std::string> prompts{"The quick brown fox"};
  int steps = 64;      // greedy steps per prompt
  int max_rounds = 8;  // decode + correct rounds before giving up
};

struct MarginReport {
  double logit_std = 0.0;
  double min_token_gap = 0.0;  // over every step of every prompt, logit units
  int min_gap_prompt = 0, min_gap_step = 0;
  double min_router_gap = 0.0;               // infinity for a dense model
  double planted_router_gap = 0.0;           // what the router rows carry; 0 without routing
  int rounds = 0;                            // decodes run
  int rows_changed = 0;                      // head rows rewritten over all rounds
  bool reached = false;                      // min_token_gap >= token_margin * logit_std
  std::vector<std::vector<int32_t>> tokens;  // the greedy tokens per prompt
  double min_relative_gap() const { return logit_std > 0 ? min_token_gap / logit_std : 0.0; }
};

// base with the routing structure planted (a no-op for dense shapes).
TensorFiller margin_filler(TensorFiller base, const ModelShape& shape, const MarginOptions& o);

// Greedy decode of each prompt (text, with BOS as generate adds it) for steps
// tokens, measuring every step's top-1 minus top-2 logit gap and the router
// gaps. Fills everything but rounds and rows_changed.
MarginReport measure_margins(LlamaModel& m, const std::vector<std::string>& prompts, int steps,
                             double token_margin = 0.0);

// write_model with margin_filler, an untied head (so the head can carry the
// margin without changing the input embeddings) and the head corrected as
// described above. shape.tied_output is ignored.
MarginReport write_margin_model(const std::filesystem::path& path, ModelShape shape,
                                WriteOptions wo, const MarginOptions& o, runtime::ThreadPool& pool);

}  // namespace epyctune::engine
