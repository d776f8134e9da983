#include <doctest/doctest.h>

#include <fstream>
#include <iterator>

#include "engine/gguf/gguf.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

TEST_CASE("shape presets and custom shapes") {
  auto t = parse_shape("tiny");
  CHECK(t.dim == 64);
  CHECK(t.vocab == 512);
  auto b = parse_shape("1b");
  CHECK(b.dim == 2048);
  CHECK(b.layers == 16);
  CHECK(b.kv_heads == 8);
  CHECK(b.vocab == 32000);
  auto s = parse_shape("7b");
  CHECK(s.dim == 4096);
  CHECK(s.layers == 32);
  CHECK(s.heads == 32);
  CHECK(s.ffn == 11008);
  CHECK(s.vocab == 32000);
  CHECK(s.n_params() > 6'500'000'000ull);
  CHECK(s.n_params() < 7'000'000'000ull);
  auto c = parse_shape("dim=128,layers=3,heads=8,kv_heads=2,ffn=256,vocab=400,ctx=99");
  CHECK(c.dim == 128);
  CHECK(c.layers == 3);
  CHECK(c.kv_heads == 2);
  CHECK(c.ctx == 99);
  CHECK(parse_shape("dim=128,heads=8").kv_heads == 8);
  CHECK_THROWS_WITH(parse_shape("dim=96,heads=5"), doctest::Contains("not a multiple of heads"));
  CHECK_THROWS_WITH(parse_shape("dim=100"), doctest::Contains("odd"));
  CHECK_THROWS_WITH(parse_shape("dim=64,heads=4,kv_heads=3"), doctest::Contains("kv_heads"));
  CHECK_THROWS_WITH(parse_shape("bogus=1"), doctest::Contains("unknown key 'bogus'"));
  CHECK_THROWS_WITH(parse_shape("dim=x"), doctest::Contains("not an integer"));
  CHECK_THROWS_WITH(parse_shape("13b"), doctest::Contains("13b"));
}

TEST_CASE("q4_k_m mixes Q6_K into output, attn_v and ffn_down like llama.cpp") {
  CHECK(tensor_type_for("q4_k_m", "output.weight", 4096, 32) == GgmlType::Q6_K);
  CHECK(tensor_type_for("q4_k_m", "blk.0.ffn_down.weight", 11008, 32) == GgmlType::Q6_K);
  CHECK(tensor_type_for("q4_k_m", "blk.5.ffn_down.weight", 11008, 32) == GgmlType::Q4_K);
  CHECK(tensor_type_for("q4_k_m", "blk.6.attn_v.weight", 4096, 32) == GgmlType::Q6_K);
  CHECK(tensor_type_for("q4_k_m", "blk.31.attn_v.weight", 4096, 32) == GgmlType::Q6_K);
  CHECK(tensor_type_for("q4_k_m", "blk.3.attn_q.weight", 4096, 32) == GgmlType::Q4_K);
  CHECK(tensor_type_for("q4_k_m", "output_norm.weight", 4096, 32) == GgmlType::F32);
  // Rows that are not whole K blocks fall back to Q8_0.
  CHECK(tensor_type_for("q4_k", "blk.0.attn_q.weight", 64) == GgmlType::Q8_0);
  CHECK(tensor_type_for("q4_0", "blk.0.attn_q.weight", 64) == GgmlType::Q4_0);
  CHECK_THROWS_WITH(tensor_type_for("q3_k", "x", 64), doctest::Contains("q4_k_m"));
}

TEST_CASE("write_model: llama metadata, tokenizer, seeded and thread-count independent") {
  TempDir dir;
  auto shape = parse_shape("tiny");
  WriteOptions o;
  o.quant = "q4_0";
  o.seed = 42;
  o.threads = 1;
  write_model(dir.path() / "a.gguf", shape, o);
  o.threads = 2;
  write_model(dir.path() / "b.gguf", shape, o);
  o.seed = 43;
  write_model(dir.path() / "c.gguf", shape, o);
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(slurp(dir.path() / "a.gguf") == slurp(dir.path() / "b.gguf"));
  CHECK(slurp(dir.path() / "a.gguf") != slurp(dir.path() / "c.gguf"));
  auto f = gguf::File::open(dir.path() / "a.gguf");
  CHECK(f->get_string("general.architecture") == "llama");
  CHECK(f->get_uint("general.file_type") == 2u);
  CHECK(f->get_uint("llama.block_count") == 2u);
  CHECK(f->get_uint("llama.rope.dimension_count") == 16u);
  REQUIRE(f->get_array("tokenizer.ggml.tokens") != nullptr);
  CHECK(f->get_array("tokenizer.ggml.tokens")->items.size() == 512);
  CHECK(f->tensor("blk.1.ffn_down.weight")->type == GgmlType::Q4_0);
  CHECK(f->tensor("output_norm.weight")->type == GgmlType::F32);
  CHECK(f->tensors().size() == 3 + 2 * 9);
}

TEST_CASE("seeded weights have the intended scale") {
  auto fill = seeded_filler(5, parse_shape("tiny"));
  std::vector<float> v(256 * 64);
  fill("blk.0.attn_q.weight", 256, 0, 64, v.data());
  double s2 = 0, s1 = 0;
  for (float x : v) s1 += x, s2 += double(x) * x;
  double mean = s1 / v.size(), sd = std::sqrt(s2 / v.size() - mean * mean);
  CHECK(std::abs(mean) < 0.01);
  CHECK(sd == doctest::Approx(1.0 / 16).epsilon(0.05));
  std::vector<float> row3(256);
  fill("blk.0.attn_q.weight", 256, 3, 1, row3.data());
  CHECK(std::equal(row3.begin(), row3.end(), v.begin() + 3 * 256));  // rows seeded independently
  fill("blk.0.ffn_norm.weight", 64, 0, 1, v.data());
  CHECK(v[0] == 1.0f);
}
