#include "engine/model/kv_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine {

size_t KvShape::row_bytes() const {
  switch (type) {
    case GgmlType::F32:
      return sizeof(float) * size_t(head_dim);
    case GgmlType::Q8_0:
      return size_t(head_dim) / 32 * 34;  // an F16 scale and 32 int8 per block
    default:
      return 2 * size_t(head_dim);
  }
}

size_t KvShape::block_bytes() const {
  return size_t{2} * KvPool::kBlockPositions * size_t(n_layers) * size_t(n_kv_heads) * row_bytes();
}

void KvShape::check() const {
  if (type != GgmlType::F16 && type != GgmlType::F32 && type != GgmlType::Q8_0)
    throw std::invalid_argument("KV cache type must be f16, f32 or q8_0");
  if (type == GgmlType::Q8_0 && head_dim % 32 != 0)
    throw std::invalid_argument("a q8_0 KV cache needs a head size that is a multiple of 32, not " +
                                std::to_string(head_dim));
  if (n_layers < 1 || n_kv_heads < 1 || head_dim < 1)
    throw std::invalid_argument("KV cache: empty shape");
}

KvPool::KvPool(const KvShape& shape, int64_t n_blocks) : shape_(shape) {
  shape_.check();
  if (n_blocks < 1) throw std::invalid_argument("KV pool: at least one block");
  block_bytes_ = shape_.block_bytes();
  bytes_ = block_bytes_ * size_t(n_blocks);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("KV pool: cannot map " + std::to_string(bytes_) + " bytes");
  base_ = static_cast<uint8_t*>(p);
  // Fewer TLB misses for the scattered heads; a kernel without THP just says no.
  madvise(p, bytes_, MADV_HUGEPAGE);
  const auto n = size_t(n_blocks);
  refs_.assign(n, 0);
  hash_of_.assign(n, 0);
  lru_at_.assign(n, lru_.end());
  // Block 0 on top: a lone sequence gets blocks in address order, as the
  // dense cache laid them out.
  free_.resize(n);
  for (size_t i = 0; i < n; ++i) free_[i] = static_cast<int>(n - 1 - i);
}

KvPool::~KvPool() {
  munmap(base_, bytes_);
}

int64_t KvPool::available() const {
  return static_cast<int64_t>(free_.size() + lru_.size()) - reserved_;
}

bool KvPool::reserve(int64_t n) {
  if (n <= 0) return true;
  if (n > available()) return false;
  reserved_ += n;
  return true;
}

void KvPool::unreserve(int64_t n) {
  reserved_ -= std::min(n, reserved_);
}

int KvPool::take(bool reserved) {
  if (reserved) {
    if (reserved_ <= 0) throw std::logic_error("KvPool::take: nothing reserved");
  } else if (available() <= 0) {
    return -1;
  }
  int b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    lru_at_[size_t(b)] = lru_.end();
    unpublish(b);
    ++evictions_;
  } else {
    return -1;
  }
  if (reserved) --reserved_;
  refs_[size_t(b)] = 1;
  ++used_;
  return b;
}

void KvPool::ref(int b) {
  auto& r = refs_[size_t(b)];
  if (r == 0) {
    lru_.erase(lru_at_[size_t(b)]);
    lru_at_[size_t(b)] = lru_.end();
    ++used_;
  }
  ++r;
}

void KvPool::unref(int b) {
  auto& r = refs_[size_t(b)];
  if (r <= 0) throw std::logic_error("KvPool::unref: block not referenced");
  if (--r > 0) return;
  --used_;
  if (published(b)) {
    lru_at_[size_t(b)] = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
  }
}

uint64_t KvPool::chain_hash(uint64_t prev, std::span<const int32_t> block_tokens) {
  // FNV-1a over the previous hash and the tokens, then a final mix; 0 means
  // "not published", so it is never a hash.
  uint64_t h = 1469598103934665603ULL ^ prev;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  mix(prev);
  for (int32_t t : block_tokens) mix(static_cast<uint32_t>(t));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

void KvPool::publish(int b, uint64_t hash, std::span<const int32_t> block_tokens) {
  if (!indexing_ || published(b) || index_.count(hash)) return;
  index_[hash] = b;
  hash_of_[size_t(b)] = hash;
  if (tokens_.empty()) tokens_.resize(refs_.size() * kBlockPositions);
  std::copy(block_tokens.begin(), block_tokens.end(),
            tokens_.begin() + static_cast<std::ptrdiff_t>(size_t(b) * kBlockPositions));
}

void KvPool::unpublish(int b) {
  auto& h = hash_of_[size_t(b)];
  if (h == 0) return;
  index_.erase(h);
  h = 0;
  if (refs_[size_t(b)] == 0 && lru_at_[size_t(b)] != lru_.end()) {
    // Cached and now unreachable: free at once.
    lru_.erase(lru_at_[size_t(b)]);
    lru_at_[size_t(b)] = lru_.end();
    free_.push_back(b);
  }
}

std::vector<int> KvPool::match(std::span<const int32_t> tokens, int64_t max_blocks,
                               std::vector<uint64_t>* hashes) const {
  std::vector<int> out;
  uint64_t h = 0;
  const int64_t n = std::min<int64_t>(max_blocks, int64_t(tokens.size()) / kBlockPositions);
  for (int64_t i = 0; i < n; ++i) {
    auto blk = tokens.subspan(size_t(i) * kBlockPositions, kBlockPositions);
    h = chain_hash(h, blk);
    auto it = index_.find(h);
    if (it == index_.end()) break;
    const int b = it->second;
    // The hash chain names the whole prefix; the tokens guard against a collision.
    if (!std::equal(blk.begin(), blk.end(),
                    tokens_.begin() + static_cast<std::ptrdiff_t>(size_t(b) * kBlockPositions)))
      break;
    out.push_back(b);
    if (hashes) hashes->push_back(h);
  }
  return out;
}

KvPool::Admission KvPool::plan(std::span<const int32_t> prompt, int64_t max_shared,
                               int64_t positions) const {
  Admission a;
  a.shared = match(prompt, max_shared, &a.hashes);
  const int64_t total = blocks_for(positions);
  a.need = std::max<int64_t>(0, total - int64_t(a.shared.size()));
  // Mapping a cached block takes it out of the evictable ones.
  int64_t cached = 0;
  for (int b : a.shared) cached += refs_[size_t(b)] == 0 ? 1 : 0;
  a.fits = a.need + cached <= available();
  a.ever = total <= blocks_total();
  return a;
}

}  // namespace epyctune::engine
