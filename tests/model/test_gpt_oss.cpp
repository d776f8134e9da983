// gpt-oss: attention sinks, sliding-window layers, biases on attention and
// experts, a top-k-then-softmax router, swiglu_oai experts and YaRN rope.
// Each part must matter on mkmodel's synthetic models (a model without it
// decodes differently), and a batch must give the bits of single tokens.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/moe_ffn.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

// Tiny gpt-oss: 4 experts of which 2 run, window 16, YaRN x4 over 64 positions.
constexpr const char* kShape = "tiny,arch=gpt-oss,rope_factor=4,rope_orig_ctx=64";

std::filesystem::path write(const TempDir& dir, const std::string& name, const ModelShape& s,
                            TensorFiller filler = {}, const std::string& quant = "f32") {
  auto path = dir.path() / (name + ".gguf");
  WriteOptions o;
  o.quant = quant;
  o.seed = 3;
  o.threads = 2;
  o.filler = std::move(filler);
  write_model(path, s, o);
  return path;
}

// 40 greedy tokens after a 4-token prompt: positions well past the window.
std::vector<int> greedy(const std::filesystem::path& p, int n = 40) {
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

// The seeded weights with the tensors whose names end in `suffix` set to v.
TensorFiller with(const ModelShape& s, std::string suffix, float v) {
  auto base = seeded_filler(3, s);
  return [base, suffix, v](std::string_view name, int64_t ne0, int64_t r0, int64_t n, float* out) {
    base(name, ne0, r0, n, out);
    if (name.ends_with(suffix)) std::fill(out, out + ne0 * n, v);
  };
}

}  // namespace

TEST_CASE("a gpt-oss model loads with its sinks, window, biases, router and YaRN") {
  TempDir dir;
  const ModelShape s = parse_shape(kShape);
  auto pool = runtime::ThreadPool::unpinned(1);
  auto m = LlamaModel::load(write(dir, "m", s), pool);
  const LlamaConfig& c = m->config();
  CHECK(c.arch == Arch::gpt_oss);
  CHECK(c.arch_name == "gpt-oss");
  CHECK(c.rope_neox);
  CHECK(c.attn_qkv_bias);
  CHECK(c.attn_out_bias);
  CHECK(c.attn_sinks);
  CHECK(c.moe_biases);
  CHECK(c.n_swa == 16);
  CHECK(c.swa_layer(0));
  CHECK_FALSE(c.swa_layer(1));
  CHECK(c.moe_gating == MoeGating::topk_softmax);
  CHECK(c.expert_glu == GluKind::swiglu_oai);
  CHECK_FALSE(c.expert_weights_norm);
  CHECK(c.rope_scaling == RopeScaling::yarn);
  CHECK(c.rope_freq_scale == doctest::Approx(0.25));
  CHECK(c.rope_orig_ctx == 64);
  CHECK(c.n_expert == 4);
  CHECK(c.n_expert_used == 2);

  // The real geometry, as mkmodel's preset writes it.
  const ModelShape g = parse_shape("gpt-oss-20b");
  CHECK(g.layers == 24);
  CHECK(g.dim == 2880);
  CHECK(g.heads == 64);
  CHECK(g.head_dim() == 64);
  CHECK(g.kv_heads == 8);
  CHECK(g.experts == 32);
  CHECK(g.experts_used == 4);
  CHECK(g.expert_ffn == 2880);
  CHECK(g.swa == 128);
  CHECK(g.vocab == 201088);
  CHECK(parse_shape("gpt-oss-20b,layers=2").layers == 2);
  CHECK(parse_shape("gpt-oss-120b").experts == 128);
  // The released files' mix: MXFP4 experts, Q8_0 elsewhere, vectors f32.
  CHECK(tensor_type_for("mxfp4_moe", "blk.0.ffn_up_exps.weight", 2880) == GgmlType::MXFP4);
  CHECK(tensor_type_for("mxfp4_moe", "blk.0.attn_q.weight", 2880) == GgmlType::Q8_0);
  CHECK(tensor_type_for("mxfp4_moe", "blk.0.attn_sinks.weight", 64) == GgmlType::F32);
  CHECK(tensor_type_for("q8_0", "blk.0.ffn_up_exps.bias", 2880) == GgmlType::F32);
}

TEST_CASE("gpt-oss: a batch gives the bits of single tokens, past the sliding window") {
  TempDir dir;
  const auto p = write(dir, "m", parse_shape(kShape));
  std::vector<int32_t> toks(40);
  for (int i = 0; i < 40; ++i) toks[i] = (i * 37 + 5) % 500;
  auto pool = runtime::ThreadPool::unpinned(2);
  auto a = LlamaModel::load(p, pool);
  auto b = LlamaModel::load(p, pool);
  const int V = a->n_vocab();
  std::vector<float> batch(size_t(V) * toks.size()), one(V);
  a->forward(toks, batch.data());
  bool all_equal = true;
  for (size_t i = 0; i < toks.size(); ++i) {
    b->forward({&toks[i], 1}, one.data());
    all_equal = all_equal && bit_equal(one.data(), batch.data() + i * V, V);
  }
  CHECK(all_equal);
}

TEST_CASE("gpt-oss's sinks, window, biases and YaRN each change the greedy output") {
  TempDir dir;
  const ModelShape s = parse_shape(kShape);
  const auto base = greedy(write(dir, "base", s));
  // A sink of -1e30 takes no probability: the model without sinks.
  CHECK(greedy(write(dir, "nosink", s, with(s, "attn_sinks.weight", -1e30f))) != base);
  // A window as long as the context: every layer attends to all positions.
  ModelShape full = s;
  full.swa = s.ctx;
  CHECK(greedy(write(dir, "full", full)) != base);
  CHECK(greedy(write(dir, "nobo", s, with(s, "attn_output.bias", 0.0f))) != base);
  CHECK(greedy(write(dir, "norb", s, with(s, "ffn_gate_inp.bias", 0.0f))) != base);
  CHECK(greedy(write(dir, "noeb", s, with(s, "ffn_down_exps.bias", 0.0f))) != base);
  ModelShape plain = s;
  plain.rope_factor = 0;  // no YaRN keys
  CHECK(greedy(write(dir, "noyarn", plain)) != base);
}

TEST_CASE("gpt-oss with MXFP4 experts runs, a batch equal to single tokens") {
  TempDir dir;
  const auto p = write(dir, "mx", parse_shape(kShape), {}, "mxfp4_moe");
  auto f = gguf::File::open(p);
  CHECK(f->tensor("blk.0.ffn_gate_exps.weight")->type == GgmlType::MXFP4);
  CHECK(f->tensor("blk.0.attn_q.weight")->type == GgmlType::Q8_0);
  std::vector<int32_t> toks{1, 300, 17, 42, 99, 7, 250, 3};
  auto pool = runtime::ThreadPool::unpinned(2);
  auto a = LlamaModel::load(p, pool);
  auto b = LlamaModel::load(p, pool);
  const int V = a->n_vocab();
  std::vector<float> batch(size_t(V) * toks.size()), one(V);
  a->forward(toks, batch.data());
  bool all_equal = true;
  for (size_t i = 0; i < toks.size(); ++i) {
    b->forward({&toks[i], 1}, one.data());
    all_equal = all_equal && bit_equal(one.data(), batch.data() + i * V, V);
  }
  CHECK(all_equal);
}

TEST_CASE("swiglu_oai clamps the gate above and the up branch both ways, and adds 1 to up") {
  std::vector<float> g{-2.0f, 0.5f, 3.0f, 9.0f, 9.0f};
  const std::vector<float> u{1.0f, -1.0f, 10.0f, -10.0f, 0.0f};
  auto ref = [](float x, float y) {
    x = std::min(x, 7.0f);
    y = std::clamp(y, -7.0f, 7.0f);
    return x / (1.0f + std::exp(-1.702f * x)) * (y + 1.0f);
  };
  std::vector<float> want;
  for (size_t i = 0; i < g.size(); ++i) want.push_back(ref(g[i], u[i]));
  swiglu_oai(g.data(), u.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == want[i]);
  // up = -1 zeroes the output; up = -10 is clamped to -7: x * sigmoid * -6.
  CHECK(g[1] == 0.0f);
  CHECK(g[3] == doctest::Approx(7.0f / (1.0f + std::exp(-1.702f * 7.0f)) * -6.0f));
}

TEST_CASE("the gpt-oss router takes the top k logits, then softmaxes those k") {
  MoeShape s;
  s.n_expert = 5;
  s.n_used = 2;
  s.norm_weights = false;
  s.gating = MoeGating::topk_softmax;
  const float logits[5] = {1.0f, 3.0f, 2.0f, 0.0f, -1.0f};
  int32_t ex[2];
  float w[2];
  route_tokens(logits, 1, s, ex, w);
  CHECK(ex[0] == 1);
  CHECK(ex[1] == 2);
  // softmax([3, 2]): e / (e + 1) and 1 / (e + 1).
  CHECK(w[0] == doctest::Approx(std::exp(1.0) / (std::exp(1.0) + 1.0)));
  CHECK(w[1] == doctest::Approx(1.0 / (std::exp(1.0) + 1.0)));
  // qwen3moe's order (softmax over all five first) gives other weights.
  s.gating = MoeGating::softmax_topk;
  float w2[2];
  route_tokens(logits, 1, s, ex, w2);
  CHECK(w2[0] < w[0]);
}

TEST_CASE("gpt-oss: every ISA and thread count gives the scalar kernels' logits") {
  TempDir dir;
  const auto p = write(dir, "mx", parse_shape(kShape), {}, "mxfp4_moe");
  std::vector<int32_t> toks(24);
  for (int i = 0; i < 24; ++i) toks[i] = (i * 53 + 11) % 500;
  auto logits = [&](runtime::ThreadPool& pool) {
    auto m = LlamaModel::load(p, pool);
    std::vector<float> out(size_t(m->n_vocab()) * toks.size());
    m->forward(toks, out.data());
    return out;
  };
  auto two = runtime::ThreadPool::unpinned(2);
  auto three = runtime::ThreadPool::unpinned(3);
  const auto saved = kernels::active_isa();
  kernels::set_isa(kernels::Isa::scalar);
  const auto want = logits(two);
  for (int i = 1; i <= static_cast<int>(kernels::best_isa()); ++i) {
    kernels::set_isa(static_cast<kernels::Isa>(i));
    CAPTURE(kernels::isa_name(kernels::active_isa()));
    CHECK(bit_equal(logits(two).data(), want.data(), want.size()));
  }
  kernels::set_isa(saved);
  CHECK(bit_equal(logits(three).data(), want.data(), want.size()));
}
