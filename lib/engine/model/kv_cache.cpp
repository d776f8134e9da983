#include "engine/model/kv_cache.hpp"

#include <immintrin.h>
#include <sys/mman.h>

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
  } else if (kHaveF16c) {
    f16_to_f32_f16c(reinterpret_cast<const uint16_t*>(src), dst, n);
  } else {
    kernels::dequantize_row(GgmlType::F16, src, dst, n);
  }
}

}  // namespace

KvCache::KvCache(int n_layers, int n_ctx, int n_kv_heads, int head_dim, GgmlType type)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), type_(type) {
  if (type != GgmlType::F16 && type != GgmlType::F32)
    throw std::invalid_argument("KV cache type must be f16 or f32");
  elem_ = type == GgmlType::F16 ? 2 : 4;
  const size_t blocks = (static_cast<size_t>(n_ctx) + kBlockPositions - 1) / kBlockPositions;
  bytes_ = size_t{2} * blocks * kBlockPositions * n_layers * n_kv_heads * head_dim * elem_;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("KV cache: cannot map " + std::to_string(bytes_) + " bytes");
  base_ = static_cast<uint8_t*>(p);
  // Fewer TLB misses for the scattered heads; a kernel without THP just says no.
  madvise(p, bytes_, MADV_HUGEPAGE);
}

KvCache::~KvCache() {
  munmap(base_, bytes_);
}

uint8_t* KvCache::at(bool v, int layer, int head, int pos) const {
  const size_t block = static_cast<size_t>(pos) / kBlockPositions;
  const size_t run = ((block * n_layers_ + layer) * 2 + (v ? 1 : 0)) * n_kv_heads_ + head;
  const size_t row = run * kBlockPositions + static_cast<size_t>(pos) % kBlockPositions;
  return base_ + row * head_dim_ * elem_;
}

void KvCache::store(int layer, int pos, const float* k, const float* v) {
  for (int h = 0; h < n_kv_heads_; ++h) {
    const float* ks = k + static_cast<size_t>(h) * head_dim_;
    const float* vs = v + static_cast<size_t>(h) * head_dim_;
    if (type_ == GgmlType::F32) {
      std::memcpy(at(false, layer, h, pos), ks, sizeof(float) * head_dim_);
      std::memcpy(at(true, layer, h, pos), vs, sizeof(float) * head_dim_);
    } else if (kHaveF16c) {
      f32_to_f16_f16c(ks, reinterpret_cast<uint16_t*>(at(false, layer, h, pos)), head_dim_);
      f32_to_f16_f16c(vs, reinterpret_cast<uint16_t*>(at(true, layer, h, pos)), head_dim_);
    } else {
      kernels::quantize_row(GgmlType::F16, ks, at(false, layer, h, pos), head_dim_);
      kernels::quantize_row(GgmlType::F16, vs, at(true, layer, h, pos), head_dim_);
    }
  }
}

void KvCache::load(bool v, int layer, int head, int pos0, int n, float* out) const {
  // Runs of up to kBlockPositions contiguous rows.
  for (int pos = pos0; pos < pos0 + n;) {
    const int len = std::min(pos0 + n - pos, kBlockPositions - pos % kBlockPositions);
    to_f32(type_, at(v, layer, head, pos), out, len * head_dim_);
    out += static_cast<size_t>(len) * head_dim_;
    pos += len;
  }
}

void KvCache::load_k(int layer, int head, int pos0, int n, float* out) const {
  load(false, layer, head, pos0, n, out);
}
void KvCache::load_v(int layer, int head, int pos0, int n, float* out) const {
  load(true, layer, head, pos0, n, out);
}

}  // namespace epyctune::engine
