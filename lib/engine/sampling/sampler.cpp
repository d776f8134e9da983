#include "engine/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/field_error.hpp"

namespace epyctune::engine::sampling {

void SamplerParams::validate() const {
  if (!std::isfinite(temperature))
    throw common::FieldError("temperature", "must be a finite number (0 = greedy)");
  if (top_k < 0)
    throw common::FieldError("top_k", "must be >= 0 (0 = off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw common::FieldError("top_p", "must be in (0, 1] (1 = off), got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p < 1.0f))
    throw common::FieldError("min_p", "must be in [0, 1) (0 = off), got " + std::to_string(min_p));
}

int argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("argmax: empty logits");
  int best = -1;
  float best_v = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) continue;
    if (best < 0 || v > best_v) {
      best = static_cast<int>(i);
      best_v = v;
    }
  }
  return best < 0 ? 0 : best;
}

void probabilities(std::span<const float> logits, const SamplerParams& params,
                   std::vector<float>& probs) {
  const size_t n = logits.size();
  probs.assign(n, 0.0f);
  if (n == 0) return;
  if (params.greedy()) {
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  // Softmax of logits / T, with the max subtracted for range and the sum in
  // double so the result does not depend on vocabulary order details.
  const float inv_t = 1.0f / params.temperature;
  float mx = -INFINITY;
  for (float v : logits)
    if (!std::isnan(v)) mx = std::max(mx, v * inv_t);
  if (!std::isfinite(mx)) {  // all -inf/NaN: nothing to prefer, fall back to argmax
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float v = logits[i];
    const float e = std::isnan(v) ? 0.0f : std::exp(v * inv_t - mx);
    probs[i] = e;
    sum += e;
  }
  for (auto& p : probs) p = static_cast<float>(p / sum);

  const bool use_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < n;
  const bool use_p = params.top_p < 1.0f;
  if (use_k || use_p) {
    // Candidates sorted by probability, ties by index: a total order, so the
    // kept set is the same on every run.
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    auto by_prob = [&](int a, int b) { return probs[a] != probs[b] ? probs[a] > probs[b] : a < b; };
    size_t kept = n;
    if (use_k) {
      kept = static_cast<size_t>(params.top_k);
      std::partial_sort(idx.begin(), idx.begin() + kept, idx.end(), by_prob);
    } else {
      std::sort(idx.begin(), idx.end(), by_prob);
    }
    if (use_p) {
      double mass = 0.0;
      for (size_t i = 0; i < kept; ++i) mass += probs[idx[i]];
      double cum = 0.0;
      size_t keep_p = kept;
      for (size_t i = 0; i < kept; ++i) {
        cum += probs[idx[i]] / mass;
        if (cum >= params.top_p) {
          keep_p = i + 1;
          break;
        }
      }
      kept = keep_p;
    }
    for (size_t i = kept; i < n; ++i) probs[idx[i]] = 0.0f;
  }
  if (params.min_p > 0.0f) {
    const float pmax = *std::max_element(probs.begin(), probs.end());
    const float thr = params.min_p * pmax;
    for (auto& p : probs)
      if (p < thr) p = 0.0f;
  }
  double total = 0.0;
  for (float p : probs) total += p;
  for (auto& p : probs) p = static_cast<float>(p / total);
}

int sample_from(std::span<const float> probs, double u) {
  double total = 0.0;
  int last_positive = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) {
      total += probs[i];
      last_positive = static_cast<int>(i);
    }
  }
  if (last_positive < 0)
    throw std::invalid_argument("sample_from: no token has positive probability");
  const double target = u * total;
  double cum = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    cum += probs[i];
    if (cum > target) return static_cast<int>(i);
  }
  return last_positive;  // u * total rounded up to total
}

Sampler::Sampler(SamplerParams params) : params_(params) {
  params_.validate();
}

int Sampler::sample(std::span<const float> logits, int64_t position) {
  if (params_.greedy()) {
    probs_.clear();
    return argmax(logits);
  }
  probabilities(logits, params_, probs_);
  return sample_from(probs_, uniform_at(params_.seed, position, Stream::target_sample));
}

}  // namespace epyctune::engine::sampling
