// A tiny deterministic CausalLM for testing speculation without a real model.
// Its logits at a position depend on a rolling hash of the WHOLE cached
// prefix, so a wrong truncate or a token fed twice changes every later
// prediction and the greedy-identity tests catch it. A "draft" variant adds
// seeded noise to the same logits, which sets how often it agrees.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "engine/model/causal_lm.hpp"

namespace epyctune::testing {

class ToyLM final : public engine::CausalLM {
 public:
  // sharpness scales the shared logits; noise scales the draft-only part.
  ToyLM(int vocab, int n_ctx, float sharpness = 4.0f, float noise = 0.0f, uint64_t noise_salt = 7)
      : vocab_(vocab), n_ctx_(n_ctx), sharp_(sharpness), noise_(noise), salt_(noise_salt) {}

  int n_vocab() const override { return vocab_; }
  int n_ctx() const override { return n_ctx_; }
  int pos() const override { return static_cast<int>(h_.size()); }
  void forward(std::span<const int32_t> tokens, float* logits) override {
    if (tokens.empty()) throw std::invalid_argument("ToyLM: empty batch");
    if (h_.size() + tokens.size() > static_cast<size_t>(n_ctx_))
      throw std::out_of_range("ToyLM: context overflow");
    ++passes;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab_) throw std::out_of_range("ToyLM: bad token");
      const uint64_t prev = h_.empty() ? 0x1234567ULL : h_.back();
      const uint64_t h = mix(prev ^ (static_cast<uint64_t>(tokens[i]) + 1) * 0x9e3779b97f4a7c15ULL);
      h_.push_back(h);
      if (logits == nullptr) continue;  // cache only, as LlamaModel allows
      float* row = logits + i * static_cast<size_t>(vocab_);
      for (int v = 0; v < vocab_; ++v) {
        row[v] = sharp_ * unit(h, static_cast<uint64_t>(v), 1);
        if (noise_ != 0.0f) row[v] += noise_ * unit(h, static_cast<uint64_t>(v), salt_ + 2);
      }
    }
  }
  void truncate(int pos) override {
    if (pos < 0) throw std::invalid_argument("ToyLM: negative truncate");
    if (static_cast<size_t>(pos) < h_.size()) h_.resize(static_cast<size_t>(pos));
  }

  int64_t passes = 0;

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  static float unit(uint64_t h, uint64_t v, uint64_t salt) {
    const uint64_t z = mix(h ^ mix(v * 0x2545f4914f6cdd1dULL + salt));
    return static_cast<float>(z >> 40) / static_cast<float>(1 << 24);
  }
  int vocab_, n_ctx_;
  float sharp_, noise_;
  uint64_t salt_;
  std::vector<uint64_t> h_;
};

}  // namespace epyctune::testing
