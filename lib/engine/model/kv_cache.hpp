// Keys and values of every cached position, in F16 or F32, laid out
// [position block][layer][K|V][kv head][16 positions][head_dim]: one head's
// keys are contiguous 16 positions at a time, and everything the positions
// so far use is one dense prefix. Not [layer][K|V][head][all n_ctx
// positions]: that puts each head's live rows a power of two apart (1 MiB for
// 7B at n_ctx 4096), in the same cache sets and a page each, and storing one
// token's K/V becomes a visible share of a decode pass instead of noise.
// Anonymous mmap with transparent hugepages: blocks never reached cost no
// memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine {

class KvCache {
 public:
  KvCache(int n_layers, int n_ctx, int n_kv_heads, int head_dim, GgmlType type);  // F16 or F32
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  GgmlType type() const { return type_; }
  size_t bytes() const { return bytes_; }
  const uint8_t* data() const { return base_; }
  // Stores n_kv_heads * head_dim values of K and V for (layer, pos).
  void store(int layer, int pos, const float* k, const float* v);
  // Keys (or values) of `head` at positions [pos0, pos0 + n) as f32, n * head_dim floats.
  void load_k(int layer, int head, int pos0, int n, float* out) const;
  void load_v(int layer, int head, int pos0, int n, float* out) const;

  static constexpr int kBlockPositions = 16;

 private:
  uint8_t* at(bool v, int layer, int head, int pos) const;
  void load(bool v, int layer, int head, int pos0, int n, float* out) const;
  int n_layers_, n_kv_heads_, head_dim_;
  GgmlType type_;
  size_t elem_;
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
};

}  // namespace epyctune::engine
