// qwen3moe models end to end: a batch equals single tokens, every ISA gives
// the same bits, --experts-per-token changes the output and the roofline
// counts only the active experts.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <random>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/synth/gguf_writer.hpp"
#include "engine/synth/vocab_writer.hpp"
#include "model_fixture.hpp"

using namespace epyctune;
using namespace epyctune::engine;
using testing::bit_equal;

namespace {

// A small qwen3moe file (2 layers, dim 256, 8 experts of which 3 run, expert
// FFN 256), written here with the GGUF writer and seeded normal weights.
std::filesystem::path write_qwen3moe(const testing::TempDir& dir, GgmlType quant) {
  const auto path = dir.path() / fmt::format("qwen3moe-{}.gguf", traits(quant).name);
  if (std::filesystem::exists(path)) return path;
  constexpr int kDim = 256, kLayers = 2, kHeads = 4, kKv = 2, kHd = 64, kExperts = 8, kFfn = 256,
                kVocab = 512;
  gguf::Writer w;
  const std::string a = "qwen3moe.";
  w.set_string("general.architecture", "qwen3moe");
  w.set_u32(a + "context_length", 256);
  w.set_u32(a + "embedding_length", kDim);
  w.set_u32(a + "block_count", kLayers);
  w.set_u32(a + "feed_forward_length", 512);
  w.set_u32(a + "attention.head_count", kHeads);
  w.set_u32(a + "attention.head_count_kv", kKv);
  w.set_u32(a + "attention.key_length", kHd);
  w.set_u32(a + "attention.value_length", kHd);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32(a + "rope.freq_base", 1000000.0f);
  w.set_u32(a + "expert_count", kExperts);
  w.set_u32(a + "expert_used_count", 3);
  w.set_u32(a + "expert_feed_forward_length", kFfn);
  write_synthetic_vocab(w, kVocab, 1);
  struct T {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    float std_dev;  // 0: a norm (ones)
  };
  std::vector<T> ts{{"token_embd.weight", {kDim, kVocab}, quant, 1.0f},
                    {"output_norm.weight", {kDim}, GgmlType::F32, 0},
                    {"output.weight", {kDim, kVocab}, quant, 3.0f / 16}};
  for (int i = 0; i < kLayers; ++i) {
    auto n = [i](const char* s) { return fmt::format("blk.{}.{}.weight", i, s); };
    const float s = 1.0f / 16;  // 1 / sqrt(256)
    for (T t : std::initializer_list<T>{{n("attn_norm"), {kDim}, GgmlType::F32, 0},
                                        {n("attn_q"), {kDim, kHeads * kHd}, quant, s},
                                        {n("attn_k"), {kDim, kKv * kHd}, quant, s},
                                        {n("attn_v"), {kDim, kKv * kHd}, quant, s},
                                        {n("attn_q_norm"), {kHd}, GgmlType::F32, 0},
                                        {n("attn_k_norm"), {kHd}, GgmlType::F32, 0},
                                        {n("attn_output"), {kHeads * kHd, kDim}, quant, s},
                                        {n("ffn_norm"), {kDim}, GgmlType::F32, 0},
                                        {n("ffn_gate_inp"), {kDim, kExperts}, GgmlType::F32, 3 * s},
                                        {n("ffn_gate_exps"), {kDim, kFfn, kExperts}, quant, s},
                                        {n("ffn_up_exps"), {kDim, kFfn, kExperts}, quant, s},
                                        {n("ffn_down_exps"), {kFfn, kDim, kExperts}, quant, s}})
      ts.push_back(t);
  }
  for (const auto& t : ts) w.add_tensor(t.name, t.type, t.ne);
  w.begin(path);
  std::mt19937 rng(42);
  for (const auto& t : ts) {
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    const int64_t cols = t.ne[0];
    std::normal_distribution<float> dist(0.0f, t.std_dev > 0 ? t.std_dev : 1.0f);
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> data(row_size(t.type, cols) * rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = t.std_dev > 0 ? dist(rng) : 1.0f;
      kernels::quantize_row(t.type, row.data(), data.data() + r * row_size(t.type, cols), cols);
    }
    w.write_tensor_data(t.name, data);
  }
  w.finish();
  return path;
}

std::vector<float> logits_of(const std::filesystem::path& path, runtime::ThreadPool& pool,
                             const std::vector<int32_t>& toks, int experts_per_token = 0,
                             bool one_by_one = false) {
  ModelOptions o;
  o.experts_per_token = experts_per_token;
  auto m = LlamaModel::load(path, pool, o);
  const int V = m->n_vocab();
  std::vector<float> out(toks.size() * V);
  if (!one_by_one) {
    m->forward(toks, out.data());
  } else {
    for (size_t i = 0; i < toks.size(); ++i)
      m->forward(std::span<const int32_t>(&toks[i], 1), &out[i * V]);
  }
  return out;
}

const std::vector<int32_t> kToks{1, 17, 300, 42, 5, 99, 256, 7};

}  // namespace

TEST_CASE("qwen3moe: a batch gives the single-token logits bit for bit, on 1 or 3 threads") {
  testing::TempDir dir;
  for (GgmlType quant : {GgmlType::Q4_K, GgmlType::Q8_0}) {
    CAPTURE(traits(quant).name);
    auto path = write_qwen3moe(dir, quant);
    auto one = runtime::ThreadPool::unpinned(1);
    auto three = runtime::ThreadPool::unpinned(3);
    auto batch = logits_of(path, three, kToks);
    CHECK(bit_equal(batch.data(), logits_of(path, three, kToks, 0, true).data(), batch.size()));
    CHECK(bit_equal(batch.data(), logits_of(path, one, kToks).data(), batch.size()));
  }
}

TEST_CASE("qwen3moe: every ISA gives the scalar kernels' logits") {
  testing::TempDir dir;
  auto path = write_qwen3moe(dir, GgmlType::Q4_K);
  auto pool = runtime::ThreadPool::unpinned(2);
  const auto saved = kernels::active_isa();
  kernels::set_isa(kernels::Isa::scalar);
  auto want = logits_of(path, pool, kToks);
  for (int i = 1; i <= static_cast<int>(kernels::best_isa()); ++i) {
    kernels::set_isa(static_cast<kernels::Isa>(i));
    CAPTURE(kernels::isa_name(kernels::active_isa()));
    CHECK(bit_equal(logits_of(path, pool, kToks).data(), want.data(), want.size()));
  }
  kernels::set_isa(saved);
}

TEST_CASE("qwen3moe: --experts-per-token changes the output; out of range is an error") {
  testing::TempDir dir;
  auto path = write_qwen3moe(dir, GgmlType::Q8_0);
  auto pool = runtime::ThreadPool::unpinned(2);
  auto full = logits_of(path, pool, kToks);
  CHECK(bit_equal(full.data(), logits_of(path, pool, kToks, 3).data(), full.size()));
  for (int n : {1, 2, 8}) {
    CAPTURE(n);
    CHECK_FALSE(bit_equal(full.data(), logits_of(path, pool, kToks, n).data(), full.size()));
  }
  CHECK_THROWS_WITH(logits_of(path, pool, kToks, 9), doctest::Contains("has 8 experts per layer"));
  auto dense = testing::make_model(dir, "tiny", "q8_0");
  CHECK_THROWS_WITH(logits_of(dense, pool, kToks, 2), doctest::Contains("no experts"));
}

TEST_CASE("qwen3moe: the roofline counts the router and the active experts only") {
  testing::TempDir dir;
  auto path = write_qwen3moe(dir, GgmlType::Q8_0);
  auto pool = runtime::ThreadPool::unpinned(1);
  auto m = LlamaModel::load(path, pool);
  const auto& c = m->config();
  CHECK(c.n_expert == 8);
  CHECK(c.n_expert_used == 3);
  const uint64_t expert = 3 * row_size(GgmlType::Q8_0, 256) * 256;  // gate + up + down
  auto two = LlamaModel::load(path, pool, [] {
    ModelOptions o;
    o.experts_per_token = 2;
    return o;
  }());
  CHECK(m->weight_bytes_per_pass(1) - two->weight_bytes_per_pass(1) == 2 * expert);
  // Every expert of both layers is in the file; a token reads 3 of 8.
  CHECK(m->load_report().weight_bytes - m->weight_bytes_per_pass(1) > 2 * 5 * expert);
  CHECK(m->weight_bytes_per_pass(8) > m->weight_bytes_per_pass(1));
  CHECK(m->weight_bytes_per_pass(64) <= m->load_report().weight_bytes + 64 * 256);
}
