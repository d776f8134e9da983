// One model's KV memory as a pool of fixed-size blocks of 16 positions, each
// laid out [layer][K|V][kv head][16 positions][row]: a sequence's block table
// (KvCache) maps its logical blocks onto pool blocks, and attention still
// loads one head's keys 16 contiguous positions at a time. One anonymous
// mmap (transparent hugepages; blocks never touched cost no memory), so the
// whole pool is one address range to bind to the model's NUMA nodes.
//
// Blocks are refcounted. A full block can be published under the hash chain
// of its tokens (the previous block's hash and these 16 tokens), so another
// sequence with the same prefix maps it instead of computing it again. An
// unreferenced published block stays cached in an LRU and is evicted only
// when a block is needed and none is free.
//
// Reservations make admission safe: a sequence reserves every block it can
// ever take up front, and taking a reserved block never fails. available()
// counts free and evictable blocks, less what is reserved.
//
// Not thread-safe: the thread that runs the model's passes owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine {

// One cached position's shape: K and V rows of head_dim values per kv head
// and layer, in F32, F16 or Q8_0 (int8 with one F16 scale per 32 values).
struct KvShape {
  int n_layers = 0, n_kv_heads = 0, head_dim = 0;
  GgmlType type = GgmlType::F16;
  size_t row_bytes() const;    // one head's row of head_dim values
  size_t block_bytes() const;  // 16 positions of every layer, K and V, head
  // Throws std::invalid_argument for a type the cache cannot hold or a
  // head_dim Q8_0 cannot split in 32s.
  void check() const;
};

class KvPool {
 public:
  static constexpr int kBlockPositions = 16;
  static int64_t blocks_for(int64_t positions) {
    return (positions + kBlockPositions - 1) / kBlockPositions;
  }

  KvPool(const KvShape& shape, int64_t n_blocks);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvShape& shape() const { return shape_; }
  size_t block_bytes() const { return block_bytes_; }
  uint8_t* block(int b) const { return base_ + static_cast<size_t>(b) * block_bytes_; }
  const uint8_t* data() const { return base_; }
  size_t bytes() const { return bytes_; }

  int64_t blocks_total() const { return static_cast<int64_t>(refs_.size()); }
  int64_t blocks_used() const { return used_; }  // mapped by at least one sequence
  int64_t blocks_cached() const { return static_cast<int64_t>(lru_.size()); }
  int64_t blocks_reserved() const { return reserved_; }
  // Blocks a new reservation may still claim: free and evictable ones, less
  // the reserved.
  int64_t available() const;
  uint64_t evictions() const { return evictions_; }

  // Claims n blocks for later take(true); false (nothing claimed) when
  // available() < n.
  bool reserve(int64_t n);
  void unreserve(int64_t n);
  // A block with one reference: a free one, else the least recently used
  // cached one (evicted). reserved: from a reservation (never fails); else
  // only from what no reservation claims. -1 when there is none.
  int take(bool reserved);
  void ref(int b);    // one more sequence maps b (a cached one leaves the LRU)
  void unref(int b);  // the last reference frees b, or caches it when published
  int refs(int b) const { return refs_[size_t(b)]; }

  // The prefix index. Only a pool with indexing on publishes.
  void set_indexing(bool on) { indexing_ = on; }
  bool indexing() const { return indexing_; }
  static uint64_t chain_hash(uint64_t prev, std::span<const int32_t> block_tokens);
  // Publishes full block b under hash (its tokens kept to check a match);
  // no-op when another block holds that hash already.
  void publish(int b, uint64_t hash, std::span<const int32_t> block_tokens);
  bool published(int b) const { return hash_of_[size_t(b)] != 0; }
  void unpublish(int b);
  // The published blocks holding the leading full blocks of tokens, at most
  // max_blocks, in order; hashes receives each one's chain hash.
  std::vector<int> match(std::span<const int32_t> tokens, int64_t max_blocks,
                         std::vector<uint64_t>* hashes = nullptr) const;

  // What admitting a sequence of up to `positions` positions whose first
  // tokens are `prompt` takes: the published blocks it maps (leading full
  // blocks, at most max_shared), and the blocks it must reserve besides.
  struct Admission {
    std::vector<int> shared;
    std::vector<uint64_t> hashes;
    int64_t need = 0;
    bool fits = false;  // now: need plus the cached blocks it maps are available
    bool ever = false;  // in an empty pool
  };
  Admission plan(std::span<const int32_t> prompt, int64_t max_shared, int64_t positions) const;

 private:
  KvShape shape_;
  size_t block_bytes_ = 0, bytes_ = 0;
  uint8_t* base_ = nullptr;
  std::vector<int> refs_;
  std::vector<int> free_;  // a stack: the most recently freed block first
  std::list<int> lru_;     // unreferenced published blocks, least recently used first
  std::vector<std::list<int>::iterator> lru_at_;
  std::vector<uint64_t> hash_of_;  // 0: not published
  std::vector<int32_t> tokens_;    // kBlockPositions per block, for published ones
  std::unordered_map<uint64_t, int> index_;
  int64_t used_ = 0, reserved_ = 0;
  uint64_t evictions_ = 0;
  bool indexing_ = false;
};

}  // namespace epyctune::engine
