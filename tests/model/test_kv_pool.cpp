// The paged KV pool: blocks taken and given back, reservations that never
// fail, the prefix index and its LRU, copy on write, and pooled sequences
// that map another sequence's blocks and compute the same logits.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "engine/kernels/kernels.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/kv_pool.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

const KvShape kShape{2, 2, 32, GgmlType::F32};

std::vector<int32_t> block_tokens(int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < KvPool::kBlockPositions; ++i) t.push_back(seed * 100 + i);
  return t;
}

// Fills positions [p0, p1) of every layer and head with values naming them.
void fill(KvCache& kv, int p0, int p1, float tag) {
  std::vector<float> k(size_t(kShape.n_kv_heads) * kShape.head_dim), v(k.size());
  for (int l = 0; l < kShape.n_layers; ++l)
    for (int p = p0; p < p1; ++p) {
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = tag + float(l * 10000 + p * 100) + float(i) * 0.5f;
        v[i] = -k[i];
      }
      kv.store(l, p, k.data(), v.data());
    }
}

float key_at(const KvCache& kv, int layer, int head, int pos) {
  std::vector<float> out(size_t(kShape.head_dim));
  kv.load_k(layer, head, pos, 1, out.data());
  return out[0];
}

}  // namespace

TEST_CASE("the KV pool: reservations, block refcounts, the prefix index and its LRU") {
  KvPool pool(kShape, 4);
  pool.set_indexing(true);
  CHECK(pool.blocks_total() == 4);
  CHECK(pool.available() == 4);
  CHECK(pool.reserve(3));
  CHECK_FALSE(pool.reserve(2));  // 1 left unreserved
  CHECK(pool.available() == 1);
  const int a = pool.take(true), b = pool.take(true);
  CHECK(a == 0);  // a lone user gets blocks in address order
  CHECK(b == 1);
  CHECK(pool.blocks_used() == 2);
  CHECK(pool.blocks_reserved() == 1);
  CHECK(pool.take(false) == 2);
  CHECK(pool.take(false) == -1);  // the last block is promised
  const int c = pool.take(true);
  CHECK(c == 3);
  CHECK_THROWS_AS(pool.take(true), std::logic_error);

  // Published blocks stay cached when released; others are free at once.
  const auto t0 = block_tokens(1), t1 = block_tokens(2);
  const uint64_t h0 = KvPool::chain_hash(0, t0), h1 = KvPool::chain_hash(h0, t1);
  pool.publish(a, h0, t0);
  pool.publish(b, h1, t1);
  std::vector<int32_t> prompt = t0;
  prompt.insert(prompt.end(), t1.begin(), t1.end());
  prompt.push_back(7);
  CHECK(pool.match(prompt, 10) == std::vector<int>{a, b});
  CHECK(pool.match(prompt, 1) == std::vector<int>{a});
  std::vector<int32_t> other = prompt;
  other[3] = 99;  // the first block differs: nothing matches, whatever follows
  CHECK(pool.match(other, 10).empty());
  pool.unref(b);
  pool.unref(a);
  pool.unref(c);
  pool.unref(2);
  CHECK(pool.blocks_used() == 0);
  CHECK(pool.blocks_cached() == 2);
  CHECK(pool.available() == 4);
  CHECK(pool.match(prompt, 10) == std::vector<int>{a, b});

  // Admission counts cached blocks as free, but mapping them takes them.
  auto plan = pool.plan(prompt, 2, 64);
  CHECK(plan.shared == std::vector<int>{a, b});
  CHECK(plan.need == 2);
  CHECK(plan.fits);                            // 2 new + 2 cached mapped <= 4
  CHECK_FALSE(pool.plan(prompt, 2, 80).ever);  // 5 blocks > 4

  // Eviction: the free blocks go first, then the least recently used cached
  // block; its hash leaves the index.
  CHECK(pool.reserve(3));
  const int x = pool.take(true), y = pool.take(true);
  CHECK(x != a);
  CHECK(y != b);
  CHECK(pool.evictions() == 0);
  const int z = pool.take(true);
  CHECK(pool.evictions() == 1);
  CHECK(z == b);  // b was released first: least recently used
  CHECK(pool.match(prompt, 10) == std::vector<int>{a});
}

TEST_CASE("a paged cache takes blocks as positions come, and copies a shared block it writes") {
  auto pool = std::make_shared<KvPool>(kShape, 8);
  pool->set_indexing(true);
  KvCache a(pool), b(pool);
  CHECK(a.reserve_positions(40));  // 3 blocks
  CHECK(pool->blocks_reserved() == 3);
  a.prepare(0, 20);
  CHECK(a.table().size() == 2);
  CHECK(a.reserved() == 1);
  fill(a, 0, 20, 0.25f);
  const auto t0 = block_tokens(5);
  pool->publish(a.table()[0], KvPool::chain_hash(0, t0), t0);

  // b maps a's first block and reads a's values from it.
  b.map_prefix(std::vector<int>{a.table()[0]});
  CHECK(pool->refs(a.table()[0]) == 2);
  CHECK(key_at(b, 1, 1, 7) == key_at(a, 1, 1, 7));

  // A truncate into the shared block, then a write there: b gets its own copy.
  b.truncate(8);
  CHECK(b.table().size() == 1);
  b.prepare(8, 9);
  CHECK(b.table()[0] != a.table()[0]);
  CHECK(pool->refs(a.table()[0]) == 1);
  fill(b, 8, 9, 5000.0f);
  CHECK(key_at(b, 0, 0, 8) != key_at(a, 0, 0, 8));
  CHECK(key_at(b, 1, 0, 3) == key_at(a, 1, 0, 3));  // the copied positions before it

  // Writing into one's own published block takes it out of the index.
  CHECK(pool->published(a.table()[0]));
  a.truncate(4);
  a.prepare(4, 5);
  CHECK_FALSE(pool->published(a.table()[0]));

  // Truncate gives blocks back; a reserving cache keeps its promise.
  const int64_t avail = pool->available();
  a.prepare(4, 40);
  CHECK(a.table().size() == 3);
  CHECK(a.reserved() == 0);
  CHECK(pool->available() == avail);  // the blocks came out of a's reservation
  a.truncate(0);
  CHECK(a.table().empty());
  CHECK(a.reserved() == 3);
  a.drop_reservation();
  CHECK(pool->blocks_reserved() == 0);

  // With nothing left, a write without a reservation throws and moves nothing.
  auto one = std::make_shared<KvPool>(kShape, 1);
  KvCache c(one), d(one);
  c.prepare(0, 16);
  CHECK_THROWS_AS(d.prepare(0, 1), std::runtime_error);
  CHECK(d.table().empty());
}

TEST_CASE("a q8_0 KV cache stores each head's row as Q8_0 blocks and loads them back") {
  KvCache kv(1, 20, 2, 64, GgmlType::Q8_0);
  CHECK(kv.bytes() == size_t{2} * 16 * 2 * 2 * 68);  // 2 blocks, K and V, 2 heads, 64 -> 68 bytes
  std::vector<float> k(128), v(128);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::sin(float(i) * 0.37f) * 3.0f;
    v[i] = std::cos(float(i) * 0.11f);
  }
  kv.store(0, 17, k.data(), v.data());
  std::vector<float> gk(64), gv(64), want(64);
  std::vector<uint8_t> q(68);
  kv.load_k(0, 1, 17, 1, gk.data());
  kv.load_v(0, 1, 17, 1, gv.data());
  for (auto [src, got] : {std::pair{k.data() + 64, &gk}, {v.data() + 64, &gv}}) {
    kernels::quantize_row(GgmlType::Q8_0, src, q.data(), 64);
    kernels::dequantize_row(GgmlType::Q8_0, q.data(), want.data(), 64);
    CHECK(bit_equal(want.data(), got->data(), 64));
    for (int i = 0; i < 64; ++i) CHECK(std::fabs(want[size_t(i)] - src[i]) < 0.03f);
  }
  CHECK_THROWS_AS(KvCache(1, 16, 1, 40, GgmlType::Q8_0), std::invalid_argument);
}

TEST_CASE("a pooled sequence maps another's published prefix and computes the same logits") {
  TempDir dir;
  auto tp = runtime::ThreadPool::unpinned(2);
  ModelOptions mo;
  mo.kv_contexts = 2;
  auto m = LlamaModel::load(make_model(dir, "tiny", "q8_0"), tp, mo);
  m->kv_pool().set_indexing(true);
  const int V = m->n_vocab();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % V);
  auto rows = [&](Sequence& s, size_t from) {
    std::vector<SeqRow> r;
    for (size_t i = from; i < prompt.size(); ++i)
      r.push_back({&s, prompt[i], i + 1 == prompt.size()});
    return r;
  };
  std::vector<float> la(static_cast<size_t>(V)), lb(static_cast<size_t>(V));
  auto a = m->pooled_sequence();
  CHECK(a->admit(prompt, 48) == 0);  // nothing published yet
  m->forward_rows(rows(*a, 0), la.data());
  CHECK(a->pos() == 40);
  CHECK(a->kv().table().size() == 3);

  // The leading full blocks but never the last prompt token: 2 of them.
  auto b = m->pooled_sequence();
  CHECK(b->admit(prompt, 48) == 32);
  CHECK(b->kv().table()[0] == a->kv().table()[0]);
  CHECK(b->kv().table()[1] == a->kv().table()[1]);
  m->forward_rows(rows(*b, 32), lb.data());
  CHECK(bit_equal(la.data(), lb.data(), size_t(V)));
  CHECK(b->kv().table()[2] != a->kv().table()[2]);  // its tail in its own block

  // Released, a's blocks stay cached and still serve the prefix.
  a.reset();
  b.reset();
  CHECK(m->kv_pool().blocks_used() == 0);
  CHECK(m->kv_pool().blocks_cached() >= 2);
  auto c = m->pooled_sequence();
  CHECK(c->admit(prompt, 48) == 32);
  CHECK_THROWS_AS(c->admit(prompt, 48), std::logic_error);  // not empty
  c->clear();
  CHECK(c->pos() == 0);
  CHECK(m->kv_pool().blocks_reserved() == 0);
}
