#include <doctest/doctest.h>

#include <functional>

#include "engine/synth/gguf_writer.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

struct Edit {
  std::string drop_tensor;         // leave this tensor out
  std::string reshape;             // give this tensor ne1 + 1 rows
  std::string drop_key;            // leave this metadata key out
  std::string key;                 // set this u32 key ...
  uint32_t value = 0;              // ... to this value
  std::string str_key, str_value;  // set this string key
  std::string extra_tensor;        // add this f32 vector of extra_n zeros
  int64_t extra_n = 0;
};

Edit drop_tensor(std::string n) {
  Edit e;
  e.drop_tensor = std::move(n);
  return e;
}
Edit reshape(std::string n) {
  Edit e;
  e.reshape = std::move(n);
  return e;
}
Edit drop_key(std::string k) {
  Edit e;
  e.drop_key = std::move(k);
  return e;
}
Edit set_key(std::string k, uint32_t v) {
  Edit e;
  e.key = std::move(k);
  e.value = v;
  return e;
}

// Copies src to dst with one edit, data re-emitted (zeros for a reshaped tensor).
std::filesystem::path rewrite(const TempDir& dir, const std::filesystem::path& src, const Edit& e) {
  auto f = gguf::File::open(src);
  auto dst = dir.path() / "edited.gguf";
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata())
    if (k != e.drop_key) w.set(k, v);
  if (!e.key.empty()) w.set_u32(e.key, e.value);
  if (!e.str_key.empty()) w.set_string(e.str_key, e.str_value);
  std::vector<std::vector<uint8_t>> data;
  for (const auto& t : f->tensors()) {
    if (t.name == e.drop_tensor) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (t.name == e.reshape) ne[1] += 1;
    w.add_tensor(t.name, t.type, ne);
  }
  if (!e.extra_tensor.empty()) w.add_tensor(e.extra_tensor, GgmlType::F32, {e.extra_n});
  w.begin(dst);
  for (const auto& t : f->tensors()) {
    if (t.name == e.drop_tensor) continue;
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    if (t.name == e.reshape) bytes.resize(t.nbytes + row_size(t.type, t.ne[0]), 0);
    w.write_tensor_data(t.name, bytes);
  }
  if (!e.extra_tensor.empty())
    w.write_tensor_data(e.extra_tensor, std::vector<uint8_t>(size_t(e.extra_n) * 4, 0));
  w.finish();
  return dst;
}

std::string load_error(const std::filesystem::path& p) {
  auto pool = runtime::ThreadPool::unpinned(1);
  try {
    LlamaModel::load(p, pool);
  } catch (const std::exception& ex) {
    return ex.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a missing tensor is named, with the file") {
  TempDir dir;
  auto good = make_model(dir, "tiny", "q8_0");
  auto p = rewrite(dir, good, drop_tensor("blk.1.ffn_up.weight"));
  auto err = load_error(p);
  CHECK(err.find("blk.1.ffn_up.weight") != std::string::npos);
  CHECK(err.find("missing") != std::string::npos);
  CHECK(err.find("edited.gguf") != std::string::npos);
}

TEST_CASE("a wrong shape names the tensor, the shape found and the one expected") {
  TempDir dir;
  auto good = make_model(dir, "tiny", "q8_0");
  auto err = load_error(rewrite(dir, good, reshape("blk.0.attn_k.weight")));
  CHECK(err.find("blk.0.attn_k.weight") != std::string::npos);
  CHECK(err.find("[64, 33") != std::string::npos);  // found
  CHECK(err.find("expected [64, 32]") != std::string::npos);
}

TEST_CASE("missing or inconsistent metadata names the key") {
  TempDir dir;
  auto good = make_model(dir, "tiny", "q8_0");
  auto err = load_error(rewrite(dir, good, drop_key("llama.block_count")));
  CHECK(err.find("llama.block_count") != std::string::npos);
  err = load_error(rewrite(dir, good, set_key("llama.attention.head_count_kv", 3)));
  CHECK(err.find("head_count_kv = 3") != std::string::npos);
  err = load_error(rewrite(dir, good, set_key("llama.embedding_length", 128)));
  CHECK(err.find("token_embd.weight") != std::string::npos);
  err = load_error(rewrite(dir, good, drop_key("general.architecture")));
  CHECK(err.find("general.architecture") != std::string::npos);
}

TEST_CASE("a tied head (no output.weight) loads and uses token_embd") {
  TempDir dir;
  auto good = make_model(dir, "tiny", "q8_0");
  auto p = rewrite(dir, good, drop_tensor("output.weight"));
  auto pool = runtime::ThreadPool::unpinned(1);
  auto m = LlamaModel::load(p, pool);
  std::vector<float> logits(m->n_vocab());
  int32_t t = 3;
  m->forward({&t, 1}, logits.data());
  CHECK(std::isfinite(logits[0]));
  auto untied = LlamaModel::load(good, pool);
  // Same bytes per pass (the head reads a vocab x dim matrix either way), one matrix less stored.
  CHECK(m->weight_bytes_per_pass(1) == untied->weight_bytes_per_pass(1));
  CHECK(m->load_report().weight_bytes < untied->load_report().weight_bytes);
}

TEST_CASE(
    "an unsupported architecture, key or tensor is an error naming it and what is supported") {
  TempDir dir;
  auto good = make_model(dir, "tiny,arch=qwen2", "q8_0");
  Edit e;
  e.str_key = "general.architecture";
  e.str_value = "gpt2";
  auto err = load_error(rewrite(dir, good, e));
  CHECK(err.find("'gpt2' is not supported") != std::string::npos);
  CHECK(err.find("llama, qwen2, qwen3") != std::string::npos);
  // A key the engine does not implement (a sliding window) is not ignored.
  err = load_error(rewrite(dir, good, set_key("qwen2.attention.sliding_window", 4096)));
  CHECK(err.find("'qwen2.attention.sliding_window' is not supported") != std::string::npos);
  Edit x;
  x.extra_tensor = "blk.0.attn_output.bias";
  x.extra_n = 64;
  err = load_error(rewrite(dir, good, x));
  CHECK(err.find("tensor 'blk.0.attn_output.bias' is not used by a qwen2 model") !=
        std::string::npos);
  // qwen2's biases are required, and a llama model has none.
  err = load_error(rewrite(dir, good, drop_tensor("blk.1.attn_v.bias")));
  CHECK(err.find("'blk.1.attn_v.bias' is missing (a qwen2 model") != std::string::npos);
  auto q3 = make_model(dir, "tiny,arch=qwen3", "q8_0");
  err = load_error(rewrite(dir, q3, drop_tensor("blk.0.attn_k_norm.weight")));
  CHECK(err.find("'blk.0.attn_k_norm.weight' is missing (a qwen3 model") != std::string::npos);
  // rope_freqs is read for llama only, as llama.cpp does.
  Edit rf;
  rf.extra_tensor = "rope_freqs.weight";
  rf.extra_n = 8;
  err = load_error(rewrite(dir, q3, rf));
  CHECK(err.find("tensor 'rope_freqs.weight' is not used by a qwen3 model") != std::string::npos);
  Edit yarn;
  yarn.str_key = "llama.rope.scaling.type";
  yarn.str_value = "yarn";
  err = load_error(rewrite(dir, make_model(dir, "tiny", "q8_0"), yarn));
  CHECK(err.find("llama.rope.scaling.type = 'yarn' is not supported") != std::string::npos);
}

TEST_CASE("deepseek2: a missing latent-attention tensor or an unknown key is named") {
  TempDir dir;
  const auto good =
      make_model(dir,
                 "deepseek-v2-lite,layers=2,dim=128,heads=2,ffn=256,vocab=300,ctx=128,experts=4,"
                 "experts_used=2,expert_ffn=64,kv_lora=32,qk_nope=32,qk_rope=16,v_head=32",
                 "q8_0");
  CHECK(load_error(good).empty());
  auto err = load_error(rewrite(dir, good, drop_tensor("blk.1.attn_k_b.weight")));
  CHECK(err.find("'blk.1.attn_k_b.weight' is missing (a deepseek2 model") != std::string::npos);
  err = load_error(rewrite(dir, good, drop_tensor("blk.1.ffn_up_shexp.weight")));
  CHECK(err.find("'blk.1.ffn_up_shexp.weight' is missing") != std::string::npos);
  // The split form's key lengths describe the latent: anything else is an error.
  err = load_error(rewrite(dir, good, set_key("deepseek2.attention.key_length", 64)));
  CHECK(err.find("deepseek2.attention.key_length = 64") != std::string::npos);
  err = load_error(rewrite(dir, good, set_key("deepseek2.attention.indexer.head_count", 4)));
  CHECK(err.find("'deepseek2.attention.indexer.head_count' is not supported") != std::string::npos);
  err = load_error(rewrite(dir, good, set_key("deepseek2.expert_gating_func", 3)));
  CHECK(err.find("deepseek2.expert_gating_func = 3 is not supported") != std::string::npos);
  Edit x;
  x.extra_tensor = "blk.0.exp_probs_b.bias";
  x.extra_n = 4;
  // Layer 0 is dense: its router bias would be ignored.
  err = load_error(rewrite(dir, good, x));
  CHECK(err.find("tensor 'blk.0.exp_probs_b.bias' is not used by a deepseek2 model") !=
        std::string::npos);
}

TEST_CASE("a gpt-oss file missing a sink, an expert bias or its window is an error naming it") {
  TempDir dir;
  auto good = make_model(dir, "tiny,arch=gpt-oss,rope_factor=4,rope_orig_ctx=64", "q8_0");
  CHECK(load_error(good).empty());
  auto err = load_error(rewrite(dir, good, drop_tensor("blk.1.attn_sinks.weight")));
  CHECK(err.find("'blk.1.attn_sinks.weight' is missing (a gpt-oss model") != std::string::npos);
  err = load_error(rewrite(dir, good, drop_tensor("blk.0.ffn_down_exps.bias")));
  CHECK(err.find("'blk.0.ffn_down_exps.bias' is missing (a gpt-oss model") != std::string::npos);
  err = load_error(rewrite(dir, good, drop_tensor("blk.0.post_attention_norm.weight")));
  CHECK(err.find("'blk.0.post_attention_norm.weight' is missing") != std::string::npos);
  err = load_error(rewrite(dir, good, drop_key("gpt-oss.attention.sliding_window")));
  CHECK(err.find("'gpt-oss.attention.sliding_window' is missing") != std::string::npos);
  err = load_error(rewrite(dir, good, drop_key("gpt-oss.rope.scaling.factor")));
  CHECK(err.find("gpt-oss.rope.scaling.type = yarn needs gpt-oss.rope.scaling.factor") !=
        std::string::npos);
  // ffn_norm is not gpt-oss's name for the FFN's norm: an unused tensor.
  Edit x;
  x.extra_tensor = "blk.0.ffn_norm.weight";
  x.extra_n = 64;
  err = load_error(rewrite(dir, good, x));
  CHECK(err.find("tensor 'blk.0.ffn_norm.weight' is not used by a gpt-oss model") !=
        std::string::npos);
  // A key gpt-oss files do not carry (a window pattern) is not ignored.
  err = load_error(rewrite(dir, good, set_key("gpt-oss.attention.sliding_window_pattern", 3)));
  CHECK(err.find("'gpt-oss.attention.sliding_window_pattern' is not supported") !=
        std::string::npos);
}
