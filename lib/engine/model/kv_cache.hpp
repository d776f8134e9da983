// One sequence's keys and values: a block table over a KvPool (kv_pool.hpp),
// logical block i (positions [16i, 16i + 16)) in pool block table()[i].
// Within a block the layout is [layer][K|V][kv head][16 positions][row]: one
// head's keys are contiguous 16 positions at a time. Not [layer][K|V][head][all
// n_ctx positions]: that puts each head's live rows a power of two apart
// (1 MiB for 7B at n_ctx 4096), in the same cache sets and a page each, and
// storing one token's K/V becomes a visible share of a decode pass.
//
// Paged: blocks are taken from the pool as positions are reached (prepare),
// from the sequence's reservation first, and given back by truncate. A block
// another sequence also maps, or one published in the pool's prefix index, is
// never written: writing into one copies it first (copy on write).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/gguf/ggml_types.hpp"
#include "engine/model/kv_pool.hpp"

namespace epyctune::engine {

class KvCache {
 public:
  // Paged over a shared pool.
  explicit KvCache(std::shared_ptr<KvPool> pool);
  // Dense: a pool of its own holding n_ctx positions, every block mapped.
  KvCache(int n_layers, int n_ctx, int n_kv_heads, int head_dim, GgmlType type);
  ~KvCache();  // gives every block and the reservation back
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  GgmlType type() const { return pool_->shape().type; }
  size_t bytes() const { return table_.size() * pool_->block_bytes(); }  // mapped blocks
  KvPool& pool() const { return *pool_; }
  const std::vector<int>& table() const { return table_; }
  int64_t reserved() const { return reserved_; }

  // Makes positions [pos0, pos1) writable: maps a block for each one not yet
  // mapped, and copies a shared or published block it would write into.
  // Throws std::runtime_error, having written nothing, when the pool has no
  // block left for it.
  void prepare(int pos0, int pos1);
  // Gives back the blocks wholly at or past pos (a paged cache).
  void truncate(int pos);
  // Reserves blocks so that positions up to `positions` can all be mapped;
  // false (nothing reserved) when the pool cannot promise them.
  bool reserve_positions(int64_t positions);
  void drop_reservation();
  // Maps published pool blocks (KvPool::match) as this cache's first blocks;
  // the cache must be empty.
  void map_prefix(std::span<const int> blocks);

  // Stores n_kv_heads * head_dim values of K and V for (layer, pos).
  void store(int layer, int pos, const float* k, const float* v);
  // Keys (or values) of `head` at positions [pos0, pos0 + n) as f32, n * head_dim floats.
  void load_k(int layer, int head, int pos0, int n, float* out) const;
  void load_v(int layer, int head, int pos0, int n, float* out) const;
  // An F16 cache's pages of `head`'s keys (v: values) for positions [0, n),
  // one per block, as kernels::attend_pages reads them in place.
  void f16_pages(bool v, int layer, int head, int n, std::vector<const uint16_t*>& out) const;

  static constexpr int kBlockPositions = KvPool::kBlockPositions;

 private:
  uint8_t* at(bool v, int layer, int head, int pos) const;
  void load(bool v, int layer, int head, int pos0, int n, float* out) const;
  int take_block();
  std::shared_ptr<KvPool> pool_;
  std::vector<int> table_;
  int64_t reserved_ = 0;
  bool dense_ = false;
  bool reserving_ = false;  // reserve_positions promised every block it may take
  int n_layers_, n_kv_heads_;
  size_t row_bytes_;
};

}  // namespace epyctune::engine
