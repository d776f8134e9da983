#include "engine/speculative/suffix_index.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/field_error.hpp"

namespace epyctune::engine::speculative {

namespace {
uint64_t mix(uint64_t h, int32_t t) {
  h ^=
      static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 29;
  return h;
}
}  // namespace

SuffixIndex::SuffixIndex(LookupOptions opt) : opt_(opt), lo_(std::max(1, opt.ngram_min)) {
  if (opt_.enabled() && opt_.ngram_max < lo_)
    throw common::FieldError("lookup_min", "must not exceed the longest n-gram (lookup)");
  if (opt_.enabled()) heads_.resize(static_cast<size_t>(width()));
}

void SuffixIndex::keys_ending_at(size_t end, std::vector<uint64_t>& out) const {
  out.clear();
  uint64_t h = 0x51ed270b27a3c6d1ULL;
  const int longest = static_cast<int>(std::min<size_t>(end, static_cast<size_t>(opt_.ngram_max)));
  for (int n = 1; n <= longest; ++n) {
    h = mix(h, text_[end - static_cast<size_t>(n)]);
    if (n >= lo_) out.push_back(h);
  }
}

bool SuffixIndex::same(int64_t a_end, int64_t b_end, int n) const {
  return std::equal(text_.begin() + (a_end - n), text_.begin() + a_end,
                    text_.begin() + (b_end - n));
}

void SuffixIndex::push(int32_t token) {
  if (!enabled()) return;
  // The n-grams ending just before the new token now have a follower: it.
  const size_t p = text_.size();
  text_.push_back(token);
  prev_.resize(text_.size() * static_cast<size_t>(width()), -2);
  keys_ending_at(p, keys_);
  for (size_t i = 0; i < keys_.size(); ++i) {
    auto [it, fresh] = heads_[i].try_emplace(keys_[i], static_cast<int32_t>(p));
    prev_[p * static_cast<size_t>(width()) + i] = fresh ? -1 : it->second;
    it->second = static_cast<int32_t>(p);
  }
}

void SuffixIndex::truncate(size_t n) {
  while (text_.size() > n) {
    const size_t p = text_.size() - 1;
    keys_ending_at(p, keys_);
    for (size_t i = 0; i < keys_.size(); ++i) {
      const int32_t before = prev_[p * static_cast<size_t>(width()) + i];
      if (before == -1)
        heads_[i].erase(keys_[i]);
      else
        heads_[i][keys_[i]] = before;
    }
    text_.pop_back();
    prev_.resize(text_.size() * static_cast<size_t>(width()));
  }
}

void SuffixIndex::sync(std::span<const int32_t> ctx) {
  if (!enabled()) return;
  const size_t lim = std::min(text_.size(), ctx.size());
  const size_t common = static_cast<size_t>(
      std::mismatch(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(lim), ctx.begin())
          .first -
      text_.begin());
  truncate(common);
  for (size_t i = common; i < ctx.size(); ++i) push(ctx[i]);
}

int64_t SuffixIndex::follower() const {
  if (!enabled()) return -1;
  const int64_t size = static_cast<int64_t>(text_.size());
  keys_ending_at(text_.size(), keys_);
  for (int i = static_cast<int>(keys_.size()) - 1; i >= 0; --i) {
    const int n = lo_ + i;
    auto it = heads_[static_cast<size_t>(i)].find(keys_[static_cast<size_t>(i)]);
    if (it == heads_[static_cast<size_t>(i)].end()) continue;
    if (same(it->second, size, n)) return it->second;
    // A hash collision hid the real entry: fall back to the scan for this n.
    for (int64_t f = size - 1; f >= n; --f)
      if (same(f, size, n)) return f;
  }
  return -1;
}

std::vector<int32_t> SuffixIndex::continuation(int k) {
  std::vector<int32_t> out;
  const size_t base = text_.size();
  while (static_cast<int>(out.size()) < k) {
    const int64_t f = follower();
    if (f < 0) break;
    out.push_back(text_[static_cast<size_t>(f)]);
    push(out.back());
  }
  truncate(base);
  return out;
}

}  // namespace epyctune::engine::speculative
