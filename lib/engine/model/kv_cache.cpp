#include "engine/model/kv_cache.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/kernels/kernels.hpp"

namespace epyctune::engine {
namespace {

// F16 -> F32 is exact, so the F16C path and the scalar path agree bit for bit.
__attribute__((target("f16c,avx"))) void f16_to_f32_f16c(const uint16_t* s, float* d, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  if (i < n) kernels::dequantize_row(GgmlType::F16, s + i, d + i, n - i);
}

// F32 -> F16 rounds to nearest even, as the scalar converter does (and NaNs
// stay quiet NaNs with the same payload bits), so the bytes agree too.
__attribute__((target("f16c,avx"))) void f32_to_f16_f16c(const float* s, uint16_t* d, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) kernels::quantize_row(GgmlType::F16, s + i, d + i, n - i);
}

const bool kHaveF16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");

void to_f32(GgmlType t, const uint8_t* src, float* dst, int n) {
  if (t == GgmlType::F32) {
    std::memcpy(dst, src, sizeof(float) * n);
  } else if (t == GgmlType::Q8_0) {
    kernels::dequantize_row(t, src, dst, n);
  } else if (kHaveF16c) {
    f16_to_f32_f16c(reinterpret_cast<const uint16_t*>(src), dst, n);
  } else {
    kernels::dequantize_row(GgmlType::F16, src, dst, n);
  }
}

}  // namespace

KvCache::KvCache(std::shared_ptr<KvPool> pool)
    : pool_(std::move(pool)),
      n_layers_(pool_->shape().n_layers),
      n_kv_heads_(pool_->shape().n_kv_heads),
      row_bytes_(pool_->shape().row_bytes()) {}

KvCache::KvCache(int n_layers, int n_ctx, int n_kv_heads, int head_dim, GgmlType type)
    : KvCache(std::make_shared<KvPool>(KvShape{n_layers, n_kv_heads, head_dim, type},
                                       KvPool::blocks_for(std::max(1, n_ctx)))) {
  dense_ = true;
  for (int64_t i = 0; i < pool_->blocks_total(); ++i) table_.push_back(pool_->take(false));
}

KvCache::~KvCache() {
  for (auto it = table_.rbegin(); it != table_.rend(); ++it) pool_->unref(*it);
  drop_reservation();
}

int KvCache::take_block() {
  if (reserved_ > 0) {
    --reserved_;
    return pool_->take(true);
  }
  const int b = pool_->take(false);
  if (b < 0)
    throw std::runtime_error("KV pool full: all " + std::to_string(pool_->blocks_total()) +
                             " blocks are in use or reserved (serve --kv-budget sizes it)");
  return b;
}

void KvCache::prepare(int pos0, int pos1) {
  if (dense_ || pos1 <= pos0) return;
  const size_t last = size_t(pos1 - 1) / kBlockPositions;
  for (size_t i = size_t(pos0) / kBlockPositions; i <= last; ++i) {
    if (i >= table_.size()) {
      table_.push_back(take_block());
      continue;
    }
    const int b = table_[i];
    if (pool_->refs(b) > 1) {
      // Copy on write: the other holders keep the block as it is.
      const int nb = take_block();
      std::memcpy(pool_->block(nb), pool_->block(b), pool_->block_bytes());
      pool_->unref(b);
      table_[i] = nb;
    } else if (pool_->published(b)) {
      pool_->unpublish(b);  // its content is about to differ from its tokens
    }
  }
}

void KvCache::truncate(int pos) {
  if (dense_) return;
  const auto keep = size_t(KvPool::blocks_for(std::max(0, pos)));
  // The deepest block first, so the LRU evicts a prefix's tail before its head.
  while (table_.size() > keep) {
    pool_->unref(table_.back());
    table_.pop_back();
    // A reserving sequence keeps its promise: the block may be needed again.
    if (reserving_ && pool_->reserve(1)) ++reserved_;
  }
}

bool KvCache::reserve_positions(int64_t positions) {
  if (dense_) return true;
  const int64_t need = KvPool::blocks_for(positions) - int64_t(table_.size()) - reserved_;
  if (need <= 0) return true;
  if (!pool_->reserve(need)) return false;
  reserved_ += need;
  reserving_ = true;
  return true;
}

void KvCache::drop_reservation() {
  pool_->unreserve(reserved_);
  reserved_ = 0;
  reserving_ = false;
}

void KvCache::map_prefix(std::span<const int> blocks) {
  if (!table_.empty()) throw std::logic_error("KvCache::map_prefix: the cache is not empty");
  for (int b : blocks) {
    pool_->ref(b);
    table_.push_back(b);
  }
}

uint8_t* KvCache::at(bool v, int layer, int head, int pos) const {
  const size_t block = size_t(table_[size_t(pos) / kBlockPositions]);
  const size_t run = (size_t(layer) * 2 + (v ? 1 : 0)) * n_kv_heads_ + head;
  const size_t row = run * kBlockPositions + static_cast<size_t>(pos) % kBlockPositions;
  return pool_->block(int(block)) + row * row_bytes_;
}

void KvCache::store(int layer, int pos, const float* k, const float* v) {
  const GgmlType t = type();
  const int hd = pool_->shape().head_dim;
  for (int h = 0; h < n_kv_heads_; ++h) {
    const float* ks = k + static_cast<size_t>(h) * hd;
    const float* vs = v + static_cast<size_t>(h) * hd;
    if (t == GgmlType::F32) {
      std::memcpy(at(false, layer, h, pos), ks, sizeof(float) * hd);
      std::memcpy(at(true, layer, h, pos), vs, sizeof(float) * hd);
    } else if (t == GgmlType::F16 && kHaveF16c) {
      f32_to_f16_f16c(ks, reinterpret_cast<uint16_t*>(at(false, layer, h, pos)), hd);
      f32_to_f16_f16c(vs, reinterpret_cast<uint16_t*>(at(true, layer, h, pos)), hd);
    } else {  // F16 without F16C, Q8_0: the reference converters
      kernels::quantize_row(t, ks, at(false, layer, h, pos), hd);
      kernels::quantize_row(t, vs, at(true, layer, h, pos), hd);
    }
  }
}

void KvCache::load(bool v, int layer, int head, int pos0, int n, float* out) const {
  // Runs of up to kBlockPositions contiguous rows (whole Q8_0 blocks each).
  const int hd = pool_->shape().head_dim;
  for (int pos = pos0; pos < pos0 + n;) {
    const int len = std::min(pos0 + n - pos, kBlockPositions - pos % kBlockPositions);
    to_f32(type(), at(v, layer, head, pos), out, len * hd);
    out += static_cast<size_t>(len) * hd;
    pos += len;
  }
}

void KvCache::f16_pages(bool v, int layer, int head, int n,
                        std::vector<const uint16_t*>& out) const {
  static_assert(kBlockPositions == kernels::kKvPagePositions);
  if (type() != GgmlType::F16) throw std::logic_error("KvCache::f16_pages: not an F16 cache");
  out.clear();
  for (int pos = 0; pos < n; pos += kBlockPositions)
    out.push_back(reinterpret_cast<const uint16_t*>(at(v, layer, head, pos)));
}

void KvCache::load_k(int layer, int head, int pos0, int n, float* out) const {
  load(false, layer, head, pos0, n, out);
}
void KvCache::load_v(int layer, int head, int pos0, int n, float* out) const {
  load(true, layer, head, pos0, n, out);
}

}  // namespace epyctune::engine
