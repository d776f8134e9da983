// deepseek2 (DeepSeek V2 / V3 / R1) end to end on small synthetic models:
// the latent attention in both tensor forms converters write, the leading
// dense layers, shared experts and DeepSeek routing; a batch equals single
// tokens, and dropping a part changes the greedy output.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/model/moe_ffn.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

// V2-Lite's structure (plain attn_q, softmax routing, 2 shared experts, one
// dense layer) and V3's (q_lora, sigmoid with exp_probs_b, groups, scale),
// shrunk so that a model writes and decodes in well under a second.
constexpr const char* kLite =
    "deepseek-v2-lite,layers=3,dim=256,heads=4,ffn=512,vocab=512,ctx=256,experts=8,"
    "experts_used=3,expert_ffn=128,kv_lora=64,qk_nope=32,qk_rope=16,v_head=32";
constexpr const char* kV3 =
    "deepseek-v3,layers=3,dim=256,heads=4,ffn=512,vocab=512,ctx=256,experts=16,"
    "experts_used=4,expert_ffn=64,q_lora=96,kv_lora=64,qk_nope=32,qk_rope=16,v_head=32,"
    "dense_lead=1,groups=4,groups_used=2";

std::filesystem::path write(const TempDir& dir, const std::string& name, const std::string& spec,
                            const std::string& quant = "f32", TensorFiller filler = {}) {
  auto path = dir.path() / (name + ".gguf");
  WriteOptions o;
  o.quant = quant;
  o.seed = 5;
  o.threads = 2;
  o.filler = std::move(filler);
  write_model(path, parse_shape(spec), o);
  return path;
}

std::vector<float> prompt_logits(const std::filesystem::path& p, bool batched) {
  auto pool = runtime::ThreadPool::unpinned(2);
  auto m = LlamaModel::load(p, pool);
  const int V = m->n_vocab();
  const std::vector<int32_t> prompt{1, 300, 17, 42, 99, 7, 250, 3};
  std::vector<float> out(prompt.size() * V);
  if (batched) {
    m->forward(prompt, out.data());
  } else {
    for (size_t i = 0; i < prompt.size(); ++i) m->forward({&prompt[i], 1}, &out[i * V]);
  }
  return out;
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

// The seeded weights with the tensors whose names end in `suffix` zeroed.
TensorFiller zeroed(const std::string& spec, std::string suffix) {
  auto base = seeded_filler(5, parse_shape(spec));
  return [base, suffix](std::string_view name, int64_t ne0, int64_t r0, int64_t n, float* out) {
    base(name, ne0, r0, n, out);
    if (name.ends_with(suffix)) std::fill(out, out + ne0 * n, 0.0f);
  };
}

}  // namespace

TEST_CASE("deepseek2: the metadata becomes the latent attention and DeepSeek routing") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(1);
  auto lite = LlamaModel::load(write(dir, "lite", kLite, "q8_0"), pool);
  const auto& c = lite->config();
  CHECK(c.arch == Arch::deepseek2);
  CHECK(c.head_dim == 48);
  CHECK(c.n_rot == 16);
  CHECK(c.mla.qk_nope == 32);
  CHECK(c.mla.v_head_dim == 32);
  CHECK(c.mla.kv_lora_rank == 64);
  CHECK(c.mla.q_lora_rank == 0);
  CHECK(c.mla.split_kv_b);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.ffn_kind(0) == FfnKind::dense);
  CHECK(c.ffn_kind(1) == FfnKind::moe);
  CHECK(c.n_expert_shared == 2);
  CHECK(c.expert_gating == ExpertGating::softmax);
  CHECK(c.rope_scaling == RopeScaling::yarn);
  CHECK(c.rope_orig_ctx == 4096);
  auto v3 = LlamaModel::load(write(dir, "v3", kV3, "q8_0"), pool);
  const auto& d = v3->config();
  CHECK(d.mla.q_lora_rank == 96);
  CHECK(d.expert_gating == ExpertGating::sigmoid);
  CHECK(d.expert_weights_norm);
  CHECK(d.expert_weights_scale == doctest::Approx(2.5));
  CHECK(d.n_expert_groups == 4);
  CHECK(d.n_group_used == 2);
  CHECK(d.n_expert_shared == 1);
}

TEST_CASE("deepseek2: attn_kv_b and its attn_k_b / attn_v_b split give the same logits") {
  TempDir dir;
  // mkmodel writes the split tensors from the same attn_kv_b rows.
  const auto split = prompt_logits(write(dir, "split", kLite), true);
  const auto legacy =
      prompt_logits(write(dir, "legacy", std::string(kLite) + ",legacy_kv_b=1"), true);
  REQUIRE(split.size() == legacy.size());
  float worst = 0;
  for (size_t i = 0; i < split.size(); ++i)
    worst = std::max(worst, std::fabs(split[i] - legacy[i]));
  // The same sums in another order (k_nope from a transposed copy).
  CHECK(worst < 1e-3f);
}

TEST_CASE("deepseek2: a batch gives the same bits as one token at a time") {
  TempDir dir;
  for (const char* spec : {kLite, kV3})
    for (const char* quant : {"f32", "q4_0"}) {
      CAPTURE(spec);
      CAPTURE(quant);
      const auto p =
          write(dir, std::string("b-") + quant + (spec == kLite ? "l" : "3"), spec, quant);
      const auto a = prompt_logits(p, true), b = prompt_logits(p, false);
      CHECK(bit_equal(a.data(), b.data(), a.size()));
    }
}

TEST_CASE("deepseek2: dropping a part changes the greedy output") {
  TempDir dir;
  const auto lite = greedy(write(dir, "lite", kLite), 24);
  CHECK(greedy(write(dir, "noshexp", kLite, "f32", zeroed(kLite, "ffn_down_shexp.weight")), 24) !=
        lite);
  CHECK(greedy(write(dir, "noyarn", std::string(kLite) + ",yarn_factor=0"), 24) != lite);
  CHECK(greedy(write(dir, "kvnorm", kLite, "f32", zeroed(kLite, "attn_kv_a_norm.weight")), 24) !=
        lite);
  const auto v3 = greedy(write(dir, "v3", kV3), 24);
  CHECK(greedy(write(dir, "nobias", kV3, "f32", zeroed(kV3, "exp_probs_b.bias")), 24) != v3);
  CHECK(greedy(write(dir, "nogroups", std::string(kV3) + ",groups=0"), 24) != v3);
}

TEST_CASE("DeepSeek routing: sigmoid, selection by biased score, group limit, scale") {
  MoeShape s;
  s.dim = 4, s.n_expert = 8, s.n_used = 2, s.expert_ffn = 4;
  s.norm_weights = true, s.weights_scale = 2.0f, s.sigmoid = true;
  s.n_groups = 4, s.n_group_used = 1;
  // Expert 6 has the highest logit, but group 0 (experts 0, 1) has the best
  // two biased scores together; within it the bias makes expert 1 first.
  const float logits[8] = {1.0f, 0.9f, -3, -3, -3, -3, 2.0f, -3};
  const float bias[8] = {0, 0.1f, 0, 0, 0, 0, 0, 0};
  int32_t ex[2];
  float wt[2];
  route_tokens(logits, 1, s, ex, wt, bias);
  CHECK(ex[0] == 1);
  CHECK(ex[1] == 0);
  // Weights are the unbiased sigmoids, normalised, times the scale.
  const float p0 = 1 / (1 + std::exp(-1.0f)), p1 = 1 / (1 + std::exp(-0.9f));
  CHECK(wt[0] == doctest::Approx(2 * p1 / (p0 + p1)).epsilon(1e-5));
  CHECK(wt[1] == doctest::Approx(2 * p0 / (p0 + p1)).epsilon(1e-5));
  s.n_groups = 0;  // without groups expert 6 wins
  route_tokens(logits, 1, s, ex, wt, bias);
  CHECK(ex[0] == 6);
}
