// What speculative decoding needs from a model: append tokens to the KV cache
// and get their logits, and roll the cache back. The llama model implements it;
// so could any other architecture added later.
#pragma once

#include <cstdint>
#include <span>

namespace epyctune::engine {

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual int n_vocab() const = 0;
  virtual int n_ctx() const = 0;
  // Tokens currently in the KV cache.
  virtual int pos() const = 0;
  // Appends tokens at pos() in one batched pass. logits receives
  // tokens.size() rows of n_vocab(): row i is the distribution after token i.
  // A batch of K must give the same logits as K single-token calls.
  virtual void forward(std::span<const int32_t> tokens, float* logits) = 0;
  // Drops every cached position >= pos (speculative rollback).
  virtual void truncate(int pos) = 0;
};

}  // namespace epyctune::engine
