// The parts each architecture adds (qwen2's biases, qwen3's Q/K norms, NeoX
// rope, Llama 3.1's rope_freqs, the rope base) must matter on mkmodel's
// synthetic models: a model without one of them decodes differently, so a
// reference comparison on these models would catch an engine that drops it.
#include <doctest/doctest.h>

#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

std::filesystem::path write(const TempDir& dir, const std::string& name, const ModelShape& s,
                            TensorFiller filler = {}) {
  auto path = dir.path() / (name + ".gguf");
  WriteOptions o;
  o.quant = "f32";
  o.seed = 3;
  o.threads = 2;
  o.filler = std::move(filler);
  write_model(path, s, o);
  return path;
}

std::vector<int> greedy(const std::filesystem::path& p, int n) {
  auto pool = runtime::ThreadPool::unpinned(2);
  auto m = LlamaModel::load(p, pool);
  const int V = m->n_vocab();
  std::vector<float> logits(size_t(V) * 4);
  std::vector<int32_t> prompt{1, 300, 17, 42};
  m->forward(prompt, logits.data());
  std::vector<int> out{argmax(logits.data() + size_t(3) * V, V)};
  while (static_cast<int>(out.size()) < n) {
    const int32_t t = out.back();
    m->forward({&t, 1}, logits.data());
    out.push_back(argmax(logits.data(), V));
  }
  return out;
}

// The seeded weights with every bias zero: the model without its biases.
TensorFiller no_bias(const ModelShape& s) {
  auto base = seeded_filler(3, s);
  return [base](std::string_view name, int64_t ne0, int64_t r0, int64_t n, float* out) {
    base(name, ne0, r0, n, out);
    if (name.ends_with(".bias")) std::fill(out, out + ne0 * n, 0.0f);
  };
}

}  // namespace

TEST_CASE("qwen2's biases, qwen3's Q/K norms and NeoX rope each change the greedy output") {
  TempDir dir;
  ModelShape q2 = parse_shape("tiny,arch=qwen2");
  ModelShape q3 = parse_shape("tiny,arch=qwen3");
  ModelShape ll = parse_shape("tiny");
  const auto with_bias = greedy(write(dir, "q2", q2), 24);
  // Same seeded matrices (the filler is keyed by tensor name), biases zero.
  const auto without_bias = greedy(write(dir, "q2nb", q2, no_bias(q2)), 24);
  CHECK(with_bias != without_bias);
  // qwen2 without biases is qwen3 without its Q/K norms (both NeoX).
  const auto with_norm = greedy(write(dir, "q3", q3), 24);
  CHECK(with_norm != without_bias);
  // ...and llama is the same without NeoX pairing.
  CHECK(greedy(write(dir, "ll", ll), 24) != without_bias);
}

TEST_CASE("the rope base and Llama 3.1's rope_freqs change the greedy output") {
  TempDir dir;
  ModelShape a = parse_shape("tiny,rope_base=10000");
  ModelShape b = parse_shape("tiny,rope_base=1000000");
  CHECK(greedy(write(dir, "a", a), 24) != greedy(write(dir, "b", b), 24));
  // rope_freqs divide the low-frequency angles; with an original context of
  // 16 positions they stretch angles the prompt's positions reach.
  ModelShape s = parse_shape("tiny,rope_base=10000,rope_factor=8,ctx=16384");
  s.rope_orig_ctx = 16;
  CHECK(greedy(write(dir, "scaled", s), 24) != greedy(write(dir, "a", a), 24));
}

TEST_CASE("llama3_rope_freqs follows Llama 3.1's rope_scaling formula") {
  ModelShape s = parse_shape("llama3.1-8b");
  const auto f = llama3_rope_freqs(s);
  REQUIRE(f.size() == 64);
  CHECK(f.front() == 1.0f);  // high frequencies keep their angles
  CHECK(f.back() == 8.0f);   // the lowest are stretched by the whole factor
  for (size_t i = 1; i < f.size(); ++i) CHECK(f[i] >= f[i - 1]);
  CHECK(s.arch == "llama");
  CHECK(parse_shape("qwen2.5-7b,layers=2").layers == 2);
  CHECK(parse_shape("qwen2.5-7b,layers=2").kv_heads == 4);
  ModelShape q3 = parse_shape("qwen3-8b");
  CHECK(q3.q_dim() == 4096);
  CHECK(parse_shape("qwen3-0.6b").q_dim() == 2048);  // 16 heads of 128 on a dim of 1024
  CHECK_THROWS_WITH_AS(parse_shape("tiny,arch=qwen2,rope_factor=8"),
                       doctest::Contains("rope_factor"), std::invalid_argument);
}
