#include "engine/model/rope.hpp"

#include <cmath>

namespace epyctune::engine {

RopeTable::RopeTable(const LlamaConfig& c, std::vector<float> freqs)
    : head_dim_(c.head_dim),
      n_rot_(c.n_rot),
      neox_(c.rope_neox),
      base_(c.rope_freq_base),
      scale_(c.rope_freq_scale),
      freqs_(std::move(freqs)),
      cs_(static_cast<size_t>(c.n_rot)) {}

// theta_i = pos * freq_scale * freq_base^(-2i/n_rot) / freqs[i], in double
// (as kernels::rope), so the angles are exact to float precision.
void RopeTable::angles(int pos) {
  if (pos == pos_) return;
  const int half = n_rot_ / 2;
  for (int i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * scale_ * std::pow(base_, -2.0 * i / n_rot_);
    if (!freqs_.empty()) theta /= static_cast<double>(freqs_[i]);
    cs_[2 * i] = static_cast<float>(std::cos(theta));
    cs_[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
  pos_ = pos;
}

void RopeTable::apply(float* x, int n_heads, int pos) {
  angles(pos);
  const int half = n_rot_ / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<size_t>(h) * head_dim_;
    for (int i = 0; i < half; ++i) {
      // NeoX pairs element i with i + n_rot/2; the original llama layout
      // pairs adjacent elements.
      const int i0 = neox_ ? i : 2 * i;
      const int i1 = neox_ ? i + half : 2 * i + 1;
      const float cos = cs_[2 * i], sin = cs_[2 * i + 1];
      const float x0 = head[i0], x1 = head[i1];
      head[i0] = x0 * cos - x1 * sin;
      head[i1] = x0 * sin + x1 * cos;
    }
  }
}

}  // namespace epyctune::engine
