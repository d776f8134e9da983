// A mixture-of-experts SwiGLU feed-forward block (qwen3moe's), for CPUs.
//
// A router (ffn_gate_inp) scores every expert per token; the top k experts by
// softmax probability run SwiGLU over the token, and their outputs are summed
// weighted by those probabilities (normalised to sum 1 when asked). The
// expert tensors are n_expert matrices stacked along rows, so expert e is a
// row range of one Mat.
//
// Reading weights is the cost on a CPU, so only the selected experts' rows
// are read, and a batch of B tokens (a speculative verify) is grouped by
// expert: each expert any token selected is streamed once for all of them.
// Every per-token result is computed the same way whatever B and the thread
// count (the experts' outputs are summed in a fixed order, by selection
// rank), so a batch gives bit-identical rows to single-token calls.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_config.hpp"
#include "engine/model/llama_weights.hpp"

namespace epyctune::engine {
namespace runtime {
class ThreadPool;
}

struct MoeShape {
  int dim = 0;
  int n_expert = 0;
  int n_used = 0;      // top k: experts run per token
  int expert_ffn = 0;  // rows of one expert's gate/up matrix
  // Divide the k selected probabilities by their sum (qwen3moe: yes).
  bool norm_weights = true;
  // Multiply the weights by this after normalising, unless it is 0 or 1
  // (llama.cpp's expert_weights_scale, which treats 0 as unset).
  float weights_scale = 0.0f;
  // gpt-oss: the top k logits then a softmax over them, and swiglu_oai.
  MoeGating gating = MoeGating::softmax_topk;
  GluKind glu = GluKind::swiglu;
  // deepseek2 (V3): sigmoid probabilities instead of softmax, and
  // group-limited routing: experts form n_groups equal groups, a group scores
  // the sum of its two best (biased) probabilities, and only the best
  // n_group_used groups' experts can be chosen (0: no groups).
  bool sigmoid = false;
  int n_groups = 0, n_group_used = 0;
};

// ggml's swiglu_oai with gpt-oss's constants (alpha 1.702, limit 7), in
// place: g = min(g, 7), u = clamp(u, -7, 7), gate = g * sigmoid(1.702 g) * (u + 1).
void swiglu_oai(float* gate_inout, const float* up, int64_t n);

// Throws std::runtime_error naming the layer's tensor whose shape or layout
// does not fit s (a packed16 expert tensor needs expert_ffn and dim to be
// multiples of 16, since an expert then starts a 16-row panel).
void check_moe_weights(const MoeLayerWeights& w, const MoeShape& s);

// Routing of B tokens from their router logits (B rows of n_expert):
// experts[t * n_used + r] is token t's rank-r expert (highest probability
// first; equal probabilities go to the lower expert index), weights[...] its
// weight (per s.gating: its probability over all experts, or its softmax
// over the k selected ones). Pure and deterministic: the unit tests' oracle
// for selection. bias (n_expert floats, deepseek2's exp_probs_b) is added to
// the probabilities for choosing experts only; the weights stay unbiased.
void route_tokens(const float* logits, int B, const MoeShape& s, int32_t* experts, float* weights,
                  const float* bias = nullptr);

class MoeFfn {
 public:
  // out[t] = sum over ranks r of weight[t][r] * down_e(silu(gate_e x_t) * up_e x_t),
  // e = expert[t][r], for the B rows of xn (dim floats each); out is
  // overwritten. The pool runs the matmuls and must not be running a region.
  void forward(const MoeLayerWeights& w, const MoeShape& s, const float* xn, int B, float* out,
               runtime::ThreadPool& pool);

  // The last forward()'s routing (B * n_used entries each) and how many
  // distinct experts it read.
  const std::vector<int32_t>& last_experts() const { return experts_; }
  const std::vector<float>& last_weights() const { return weights_; }
  int last_distinct_experts() const { return static_cast<int>(active_.size()); }
  // Expert weight bytes read by every forward() so far (gate, up and down
  // rows of the distinct experts, plus the router), for measured rooflines.
  uint64_t bytes_read() const { return bytes_read_; }
  // The smallest gap between a token's n_used-th and next router logit over
  // every token routed since the last reset: how far routing is from a tie
  // that another engine's rounding could break the other way (infinity when
  // every expert runs).
  float min_router_gap() const { return min_gap_; }
  void reset_router_gap() { min_gap_ = std::numeric_limits<float>::infinity(); }

 private:
  void group_by_expert(int B, int n_used, int n_expert);
  void run_router(const MoeLayerWeights& w, const MoeShape& s, const float* xn, int B,
                  runtime::ThreadPool& pool);
  void run_experts(const MoeLayerWeights& w, const MoeShape& s, const float* xn,
                   runtime::ThreadPool& pool);
  void combine(const MoeShape& s, int B, float* out) const;

  std::vector<float> logits_;
  std::vector<int32_t> experts_;
  std::vector<float> weights_;
  // Token-expert pairs grouped by expert (ascending), tokens ascending within
  // an expert: pair p is token pair_token_[p] through expert pair_expert_[p].
  std::vector<int32_t> pair_token_, pair_expert_;
  std::vector<int32_t> pair_of_;  // [t * n_used + r] -> its pair
  struct Active {
    int expert;
    int p0, p1;  // its pairs
  };
  std::vector<Active> active_;
  std::vector<float> xg_, hg_, hu_, yd_;  // per pair: input, gate, up, expert output
  kernels::Acts router_acts_;
  std::vector<kernels::Acts> in_acts_, hid_acts_;  // per active expert
  uint64_t bytes_read_ = 0;
  std::vector<float> gap_row_;
  float min_gap_ = std::numeric_limits<float>::infinity();
};

}  // namespace epyctune::engine
