// Models of the 5-bit and MXFP4 types, written by mkmodel and run by the
// engine: a batch equals single-token passes bit for bit (the kernels' order
// does not depend on the batch), every ISA gives the same logits, and greedy
// generation runs and is not degenerate.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/synth/mkmodel.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

// Rows of 256 so the K-quant applies to every matrix.
const char* kShape = "dim=256,layers=2,heads=4,kv_heads=2,ffn=512,vocab=300,ctx=64";

std::vector<int32_t> tokens(int n, int vocab, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11 + salt) % vocab);
  return t;
}

}  // namespace

TEST_CASE("mkmodel maps the 5-bit and MXFP4 quant names to their types") {
  CHECK(tensor_type_for("q5_0", "blk.0.attn_q.weight", 256, 2) == GgmlType::Q5_0);
  CHECK(tensor_type_for("q5_1", "blk.0.attn_q.weight", 256, 2) == GgmlType::Q5_1);
  CHECK(tensor_type_for("q5_k", "blk.0.attn_q.weight", 256, 2) == GgmlType::Q5_K);
  CHECK(tensor_type_for("mxfp4", "blk.0.ffn_up.weight", 256, 2) == GgmlType::MXFP4);
  CHECK(tensor_type_for("q5_k_m", "output.weight", 256, 2) == GgmlType::Q6_K);
  CHECK(tensor_type_for("q5_k_m", "blk.1.ffn_down.weight", 512, 2) ==
        GgmlType::Q6_K);  // last eighth
  CHECK(tensor_type_for("q5_k_m", "blk.0.attn_q.weight", 256, 2) == GgmlType::Q5_K);
}

TEST_CASE("5-bit and MXFP4 models: batches equal single tokens, ISAs agree, generation runs") {
  TempDir dir;
  const auto best = kernels::best_isa();
  for (const char* quant : {"q5_0", "q5_1", "q5_k", "q5_k_m", "mxfp4"}) {
    CAPTURE(quant);
    auto pool = runtime::ThreadPool::unpinned(2);
    const auto path = make_model(dir, kShape, quant);
    auto batched = LlamaModel::load(path, pool);
    auto single = LlamaModel::load(path, pool);
    const int V = batched->n_vocab();
    const int K = 9;
    auto toks = tokens(K, V, 0);
    std::vector<float> lb(size_t(V) * K), ls(size_t(V) * K);
    batched->forward(toks, lb.data());
    for (int i = 0; i < K; ++i) single->forward({&toks[i], 1}, ls.data() + size_t(i) * V);
    CHECK(bit_equal(lb.data(), ls.data(), lb.size()));
    // The scalar kernels give the same logits.
    kernels::set_isa(kernels::Isa::scalar);
    auto scalar = LlamaModel::load(path, pool);
    std::vector<float> lsc(size_t(V) * K);
    scalar->forward(toks, lsc.data());
    kernels::set_isa(best);
    CHECK(bit_equal(lb.data(), lsc.data(), lb.size()));
    // Greedy generation: 16 tokens, more than two distinct.
    std::vector<int32_t> out;
    std::vector<float> logits(V);
    int32_t next = argmax(lb.data() + size_t(K - 1) * V, V);
    for (int i = 0; i < 16; ++i) {
      out.push_back(next);
      batched->forward({&next, 1}, logits.data());
      next = argmax(logits.data(), V);
    }
    std::sort(out.begin(), out.end());
    CHECK(std::unique(out.begin(), out.end()) - out.begin() > 2);
  }
}
