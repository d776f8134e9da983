#include <doctest/doctest.h>

#include <functional>

#include "engine/synth/gguf_writer.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

struct Edit {
  std::string drop_tensor;  // leave this tensor out
  std::string reshape;      // give this tensor ne1 + 1 rows
  std::string drop_key;     // leave this metadata key out
  std::string key;          // set this u32 key ...
  uint32_t value = 0;       // ... to this value
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
  std::vector<std::vector<uint8_t>> data;
  for (const auto& t : f->tensors()) {
    if (t.name == e.drop_tensor) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (t.name == e.reshape) ne[1] += 1;
    w.add_tensor(t.name, t.type, ne);
  }
  w.begin(dst);
  for (const auto& t : f->tensors()) {
    if (t.name == e.drop_tensor) continue;
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    if (t.name == e.reshape) bytes.resize(t.nbytes + row_size(t.type, t.ne[0]), 0);
    w.write_tensor_data(t.name, bytes);
  }
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
