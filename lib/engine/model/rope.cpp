#include "engine/model/rope.hpp"

#include <algorithm>
#include <cmath>

namespace epyctune::engine {

RopeTable::RopeTable(const LlamaConfig& c, std::vector<float> freqs)
    : head_dim_(c.head_dim),
      n_rot_(c.n_rot),
      neox_(c.rope_neox),
      base_(c.rope_freq_base),
      scale_(c.rope_freq_scale),
      freqs_(std::move(freqs)),
      cs_(static_cast<size_t>(c.n_rot)) {
  if (c.rope_scaling != RopeScaling::yarn) return;
  // ggml's ggml_rope_yarn_corr_dims: the pair index at which a frequency
  // turns `rot` times over the original context, for beta_fast and beta_slow.
  const float n = static_cast<float>(c.n_rot), base = c.rope_freq_base;
  auto corr_dim = [&](float rot) {
    return n *
           std::log(static_cast<float>(c.rope_orig_ctx) / (rot * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(base));
  };
  yarn_ = true;
  corr_low_ = std::max(0.0f, std::floor(corr_dim(c.yarn_beta_fast)));
  corr_high_ = std::min(n - 1.0f, std::ceil(corr_dim(c.yarn_beta_slow)));
  ext_factor_ = c.yarn_ext_factor;
  // The magnitude correction 1 + 0.1 ln(factor), as ggml applies it on top of
  // the context's attn_factor whenever ext_factor is non-zero.
  mscale_ = c.yarn_attn_factor;
  if (ext_factor_ != 0.0f) mscale_ *= 1.0f + 0.1f * std::log(1.0f / c.rope_freq_scale);
}

// theta_i = pos * freq_scale * freq_base^(-2i/n_rot) / freqs[i], in double
// (as kernels::rope), so the angles are exact to float precision.
void RopeTable::angles(int pos) {
  if (pos == pos_) return;
  const int half = n_rot_ / 2;
  for (int i = 0; i < half; ++i) {
    if (yarn_) {
      // Low pair indices (high frequencies) keep their extrapolated angle,
      // high ones are interpolated by freq_scale, with a linear ramp between.
      const double extrap = static_cast<double>(pos) * std::pow(base_, -2.0 * i / n_rot_);
      const double interp = scale_ * extrap;
      const float y =
          (static_cast<float>(i) - corr_low_) / std::max(0.001f, corr_high_ - corr_low_);
      const double mix = static_cast<double>((1.0f - std::clamp(y, 0.0f, 1.0f)) * ext_factor_);
      const double theta = interp * (1.0 - mix) + extrap * mix;
      cs_[2 * i] = static_cast<float>(std::cos(theta)) * mscale_;
      cs_[2 * i + 1] = static_cast<float>(std::sin(theta)) * mscale_;
      continue;
    }
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
