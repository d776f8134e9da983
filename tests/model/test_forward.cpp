#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>

#include "engine/kernels/kernels.hpp"
#include "engine/model/kv_cache.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

// Small enough for ASan, large enough that every code path runs: GQA (4 heads,
// 2 KV heads), 2 layers, rows that are whole Q4_K blocks.
const char* kKShape = "dim=256,layers=2,heads=4,kv_heads=2,ffn=512,vocab=300,ctx=64";

std::vector<int32_t> prompt(int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11) % vocab);
  return t;
}

}  // namespace

TEST_CASE("a tiny generated model loads with the metadata it was written with") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(1);
  auto m = LlamaModel::load(make_model(dir, "tiny", "q8_0"), pool);
  const auto& c = m->config();
  CHECK(c.dim == 64);
  CHECK(c.n_layers == 2);
  CHECK(c.n_heads == 4);
  CHECK(c.n_kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.n_vocab == 512);
  CHECK(m->n_ctx() == 512);
  CHECK(m->pos() == 0);
  CHECK(m->weight_type() == GgmlType::Q8_0);
  CHECK(m->weight_bytes_per_pass(1) < m->weight_bytes_per_pass(8));
  std::vector<float> logits(c.n_vocab);
  int32_t tok = 5;
  m->forward({&tok, 1}, logits.data());
  CHECK(m->pos() == 1);
  float lo = logits[0], hi = logits[0];
  for (float v : logits) {
    REQUIRE(std::isfinite(v));
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  CHECK(hi - lo > 1.0f);  // not a flat distribution
}

TEST_CASE("a batch of K tokens gives bit-identical logits to K single-token passes") {
  TempDir dir;
  struct Case {
    const char* shape;
    const char* quant;
    GgmlType kv;
  };
  for (Case cs : {Case{"tiny", "q4_0", GgmlType::F16}, Case{"tiny", "q8_0", GgmlType::F32},
                  Case{"tiny", "f16", GgmlType::F16}, Case{kKShape, "q4_k_m", GgmlType::F16},
                  Case{kKShape, "q4_k", GgmlType::F32},
                  // Every architecture's extra parts: biases, per-head Q/K norms with
                  // n_heads * head_dim != dim, Llama 3.1's rope_freqs.
                  Case{"tiny,arch=qwen2", "q8_0", GgmlType::F16},
                  Case{"tiny,arch=qwen3,head_dim=32", "q4_0", GgmlType::F16},
                  Case{"tiny,rope_factor=8,ctx=16384", "q8_0", GgmlType::F32}}) {
    CAPTURE(cs.shape);
    CAPTURE(cs.quant);
    auto pool = runtime::ThreadPool::unpinned(2);
    ModelOptions o;
    o.kv_type = cs.kv;
    auto path = make_model(dir, cs.shape, cs.quant);
    auto batched = LlamaModel::load(path, pool, o);
    auto single = LlamaModel::load(path, pool, o);
    const int V = batched->n_vocab();
    // A prefix first, so the batch attends to cached positions too.
    auto pre = prompt(5, V);
    std::vector<float> tmp(size_t(V) * 5);
    batched->forward(pre, tmp.data());
    single->forward(pre, tmp.data());
    for (int K : {1, 3, 8, 17}) {
      auto toks = prompt(K, V);
      for (auto& t : toks) t = (t * 7 + K) % V;
      std::vector<float> lb(size_t(V) * K), ls(size_t(V) * K);
      batched->forward(toks, lb.data());
      for (int i = 0; i < K; ++i) single->forward({&toks[i], 1}, ls.data() + size_t(i) * V);
      CAPTURE(K);
      CHECK(batched->pos() == single->pos());
      CHECK(bit_equal(lb.data(), ls.data(), lb.size()));
    }
  }
}

TEST_CASE("truncate then re-forward reproduces the logits (speculative rollback)") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(2);
  auto m = LlamaModel::load(make_model(dir, "tiny", "q4_0"), pool);
  const int V = m->n_vocab();
  auto toks = prompt(12, V);
  std::vector<float> first(size_t(V) * 12), again(size_t(V) * 4), other(size_t(V) * 4);
  m->forward(toks, first.data());
  // Roll back 4 positions, feed different tokens, roll back again, feed the originals.
  m->truncate(8);
  CHECK(m->pos() == 8);
  std::vector<int32_t> wrong{1, 2, 3, 4};
  m->forward(wrong, other.data());
  m->truncate(8);
  m->forward(std::span<const int32_t>(toks).subspan(8), again.data());
  CHECK(bit_equal(first.data() + size_t(8) * V, again.data(), again.size()));
  CHECK_FALSE(bit_equal(other.data(), again.data(), again.size()));
  m->truncate(100);  // past pos: no-op
  CHECK(m->pos() == 12);
  CHECK_THROWS_AS(m->truncate(-1), std::out_of_range);
}

TEST_CASE("greedy output and logits are identical with 1 and 2 threads") {
  TempDir dir;
  auto path = make_model(dir, kKShape, "q4_k_m");
  auto run = [&](int threads, std::vector<float>& all_logits) {
    auto pool = runtime::ThreadPool::unpinned(threads);
    auto m = LlamaModel::load(path, pool);
    const int V = m->n_vocab();
    std::vector<int32_t> out;
    std::vector<float> logits(V);
    auto p = prompt(4, V);
    m->forward_last(p, logits.data());
    for (int i = 0; i < 24; ++i) {
      all_logits.insert(all_logits.end(), logits.begin(), logits.end());
      int32_t next = argmax(logits.data(), V);
      out.push_back(next);
      m->forward({&next, 1}, logits.data());
    }
    return out;
  };
  std::vector<float> l1, l2;
  auto g1 = run(1, l1);
  auto g2 = run(2, l2);
  CHECK(g1 == g2);
  REQUIRE(l1.size() == l2.size());
  CHECK(bit_equal(l1.data(), l2.data(), l1.size()));
  // Not degenerate: the random model does not emit one token over and over.
  std::sort(g1.begin(), g1.end());
  CHECK(std::unique(g1.begin(), g1.end()) - g1.begin() > 2);
}

TEST_CASE("forward_last equals the last row of forward; nullptr logits only fill the cache") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(2);
  auto path = make_model(dir, "tiny", "q4_0");
  auto a = LlamaModel::load(path, pool);
  auto b = LlamaModel::load(path, pool);
  const int V = a->n_vocab();
  auto toks = prompt(9, V);
  std::vector<float> all(size_t(V) * 9), last(V);
  a->forward(toks, all.data());
  b->forward(std::span<const int32_t>(toks).first(4), nullptr);
  b->forward_last(std::span<const int32_t>(toks).subspan(4), last.data());
  CHECK(b->pos() == 9);
  CHECK(bit_equal(all.data() + size_t(8) * V, last.data(), V));
}

TEST_CASE("copied, hugepage and repacked weights give the file mapping's logits bit for bit") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(2);
  // Packed matrices are 16-row panels: the 300-row head ends in a 12-row
  // ggml tail; ffn 1056 gives Q4_0/Q8_0 rows a partial activation record.
  // A tied head is packed too, and the embedding lookups unpack its panels.
  const char* shape = "dim=512,layers=2,heads=8,kv_heads=4,ffn=1056,vocab=300,ctx=64";
  const char* tied = "dim=512,layers=2,heads=8,kv_heads=4,ffn=1056,vocab=300,ctx=64,tied=1";
  std::map<std::string, uint64_t> packed;  // quant -> the untied model's packed bytes
  for (auto [sh, quant] :
       {std::pair{shape, "q4_0"}, std::pair{shape, "q8_0"}, std::pair{kKShape, "q4_k"},
        std::pair{kKShape, "q4_k_m"}, std::pair{tied, "q4_0"}, std::pair{tied, "q8_0"}}) {
    CAPTURE(sh);
    CAPTURE(quant);
    auto path = make_model(dir, sh, quant);
    ModelOptions in_place;
    in_place.copy_weights = false;
    auto mapped = LlamaModel::load(path, pool, in_place);
    ModelOptions huge;
    huge.hugepages = true;
    auto copied = LlamaModel::load(path, pool, huge);  // packed where the ISA pays for it
    ModelOptions plain;
    plain.pack_weights = false;
    auto unpacked = LlamaModel::load(path, pool, plain);
    CHECK(copied->load_report().pages != runtime::PageKind::file_mmap);
    CHECK(mapped->load_report().pages == runtime::PageKind::file_mmap);
    CHECK(mapped->load_report().packed_bytes == 0);
    CHECK(unpacked->load_report().packed_bytes == 0);
    const GgmlType t = mapped->weight_type();
    if (kernels::packed_layout_pays(t)) {
      // Every layer matrix and the head; the embedding table only when tied
      // (so a tied and an untied model of one shape pack the same bytes).
      CHECK(copied->load_report().packed_bytes > 0);
      CHECK(copied->load_report().packed_bytes < copied->load_report().weight_bytes);
      auto& untied_bytes = packed[quant];
      if (sh == shape) untied_bytes = copied->load_report().packed_bytes;
      if (sh == tied) CHECK(copied->load_report().packed_bytes == untied_bytes);
    }
    const int V = mapped->n_vocab();
    for (int K : {1, 8}) {
      auto toks = prompt(6 + K, V);
      // Rows in the head's last whole panel and in its 12-row ggml tail.
      toks.insert(toks.begin(), {V - 1, V - 13, V - 12, 0});
      std::vector<float> x(size_t(V) * toks.size()), y(x.size()), z(x.size());
      mapped->forward(toks, x.data());
      copied->forward(toks, y.data());
      unpacked->forward(toks, z.data());
      CHECK(bit_equal(x.data(), y.data(), x.size()));
      CHECK(bit_equal(x.data(), z.data(), x.size()));
      for (auto* m : {mapped.get(), copied.get(), unpacked.get()}) m->truncate(0);
    }
  }
}

TEST_CASE("a batch longer than max_batch is split and still matches") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(2);
  auto path = make_model(dir, "tiny", "q8_0");
  ModelOptions small;
  small.max_batch = 4;
  auto a = LlamaModel::load(path, pool, small);
  auto b = LlamaModel::load(path, pool);
  const int V = a->n_vocab();
  auto toks = prompt(11, V);
  std::vector<float> x(size_t(V) * 11), y(size_t(V) * 11);
  a->forward(toks, x.data());
  b->forward(toks, y.data());
  CHECK(bit_equal(x.data(), y.data(), x.size()));
}

TEST_CASE("context overflow and bad token ids are refused without touching the cache") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(1);
  ModelOptions o;
  o.n_ctx = 4;
  auto m = LlamaModel::load(make_model(dir, "tiny", "q8_0"), pool, o);
  std::vector<float> logits(size_t(m->n_vocab()) * 5);
  std::vector<int32_t> five{1, 2, 3, 4, 5};
  CHECK_THROWS_WITH_AS(m->forward(five, logits.data()), doctest::Contains("context full"),
                       std::out_of_range);
  CHECK(m->pos() == 0);
  int32_t bad = m->n_vocab();
  CHECK_THROWS_WITH_AS(m->forward({&bad, 1}, logits.data()), doctest::Contains("vocabulary"),
                       std::out_of_range);
  CHECK(m->pos() == 0);
}

TEST_CASE("the KV cache returns every layer, head and position, across its 16-position blocks") {
  const int layers = 2, ctx = 37, heads = 3, hd = 8;
  // Distinct integers; F16 keeps 11 significant bits, so compare with its rounding.
  auto value = [&](int v, int l, int p, int h, int i) {
    return static_cast<float>((((v * layers + l) * ctx + p) * heads + h) * hd + i);
  };
  for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
    CAPTURE(traits(type).name);
    KvCache kv(layers, ctx, heads, hd, type);
    std::vector<float> k(heads * hd), v(heads * hd);
    for (int l = 0; l < layers; ++l)
      for (int p = 0; p < ctx; ++p) {
        for (int h = 0; h < heads; ++h)
          for (int i = 0; i < hd; ++i) {
            k[h * hd + i] = value(0, l, p, h, i);
            v[h * hd + i] = value(1, l, p, h, i);
          }
        kv.store(l, p, k.data(), v.data());
      }
    for (auto [p0, n] : {std::pair{0, ctx}, {5, 30}, {15, 2}, {16, 16}, {36, 1}})
      for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
          std::vector<float> gk(size_t(n) * hd), gv(size_t(n) * hd);
          kv.load_k(l, h, p0, n, gk.data());
          kv.load_v(l, h, p0, n, gv.data());
          auto want = [&](int vv, int j, int i) {
            float x = value(vv, l, p0 + j, h, i);
            if (type == GgmlType::F32) return x;
            uint16_t half;
            kernels::quantize_row(GgmlType::F16, &x, &half, 1);
            kernels::dequantize_row(GgmlType::F16, &half, &x, 1);
            return x;
          };
          bool ok = true;
          for (int j = 0; j < n; ++j)
            for (int i = 0; i < hd; ++i)
              ok = ok && gk[size_t(j) * hd + i] == want(0, j, i) &&
                   gv[size_t(j) * hd + i] == want(1, j, i);
          CHECK_MESSAGE(ok, "layer ", l, " head ", h, " positions ", p0, "+", n);
        }
  }
}

TEST_CASE("the F16 KV cache rounds exactly as the scalar converter") {
  // Ties, subnormals, overflow to infinity, NaN, and values on both sides of
  // every rounding boundary in one head of 40 (8-wide SIMD part + tail).
  std::vector<float> k(40), v(40);
  const float special[] = {0.0f,     -0.0f,    1.0f / 3,       65504.0f, 65520.0f, -70000.0f,
                           5.96e-8f, 2.98e-8f, 1.00048828125f, 1e-6f,    NAN,      -1.5e-5f};
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = i < std::size(special) ? special[i] : std::ldexp(1.0f + 0.37f * i, int(i % 11) - 5);
    v[i] = -k[i] * 0.999f;
  }
  KvCache kv(1, 4, 1, 40, GgmlType::F16);
  kv.store(0, 2, k.data(), v.data());
  std::vector<float> gk(40), gv(40);
  kv.load_k(0, 0, 2, 1, gk.data());
  kv.load_v(0, 0, 2, 1, gv.data());
  std::vector<uint16_t> h(40);
  std::vector<float> want(40);
  for (auto [src, got] : {std::pair{&k, &gk}, {&v, &gv}}) {
    kernels::quantize_row(GgmlType::F16, src->data(), h.data(), 40);
    kernels::dequantize_row(GgmlType::F16, h.data(), want.data(), 40);
    CHECK(bit_equal(want.data(), got->data(), 40));
  }
}

TEST_CASE("load reports the copy and the page-in through the progress callback") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(2);
  const auto path = make_model(dir, kKShape, "q8_0");
  struct Call {
    std::string stage;
    uint64_t done, total;
  };
  std::vector<Call> calls;
  ModelOptions mo;
  mo.prefault = true;
  mo.progress = [&](std::string_view stage, uint64_t done, uint64_t total) {
    calls.push_back({std::string(stage), done, total});
  };
  auto m = LlamaModel::load(path, pool, mo);
  const uint64_t weights = m->load_report().weight_bytes;
  for (const char* stage : {"copy", "page-in"}) {
    CAPTURE(stage);
    std::vector<Call> mine;
    for (const auto& c : calls)
      if (c.stage == stage) mine.push_back(c);
    REQUIRE(mine.size() >= 2);
    CHECK(mine.front().done == 0);
    CHECK(mine.back().done == mine.back().total);
    CHECK(mine.back().total > weights / 2);  // every matrix, in bytes
    CHECK(mine.back().total <= weights);
    for (size_t i = 1; i < mine.size(); ++i) CHECK(mine[i].done >= mine[i - 1].done);
  }
  // The callback changes nothing: same logits as a silent load.
  auto silent = LlamaModel::load(path, pool);
  std::vector<float> x(size_t(m->n_vocab()) * 3), y(x.size());
  const auto toks = prompt(3, m->n_vocab());
  m->forward(toks, x.data());
  silent->forward(toks, y.data());
  CHECK(bit_equal(x.data(), y.data(), x.size()));
}
