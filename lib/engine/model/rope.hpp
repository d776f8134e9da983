// Rotary position embedding over a whole token (every head), with the
// per-frequency divisors of Llama 3.1's rope scaling. Internal to the model.
#pragma once

#include <vector>

#include "engine/model/llama_config.hpp"

namespace epyctune::engine {

class RopeTable {
 public:
  // freqs: n_rot / 2 divisors of the angles (rope_freqs.weight), or empty.
  RopeTable(const LlamaConfig& c, std::vector<float> freqs);
  // Rotates n_heads heads of head_dim floats, contiguous from x, for position
  // pos. The angles depend only on (pos, i), so a token's result does not
  // depend on the batch it came in.
  void apply(float* x, int n_heads, int pos);

 private:
  void angles(int pos);
  int head_dim_, n_rot_;
  bool neox_;
  double base_, scale_;
  std::vector<float> freqs_;
  // YaRN (RopeScaling::yarn): the pair indices between which interpolation
  // ramps into extrapolation, the mix factor and the magnitude scale.
  bool yarn_ = false;
  float corr_low_ = 0, corr_high_ = 0, ext_factor_ = 0, mscale_ = 1;
  int pos_ = -1;
  std::vector<float> cs_;  // cos, sin pairs for pos_
};

}  // namespace epyctune::engine
