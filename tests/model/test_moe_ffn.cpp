// The mixture-of-experts block against a plain float reference, and its
// determinism: a batch equals single tokens bit for bit, whatever the thread
// count, ISA and weight layout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/model/moe_ffn.hpp"
#include "engine/runtime/thread_pool.hpp"

using namespace epyctune::engine;

namespace {

// A stacked weight tensor: storage, its float values, and a Mat over it.
struct Tensor {
  std::vector<uint8_t, kernels::AlignedAllocator<uint8_t>> data;
  std::vector<float> deq;
  Mat m;
};

Tensor make_tensor(const char* name, GgmlType t, int64_t rows, int64_t cols, float scale,
                   uint32_t seed) {
  Tensor w;
  w.m.name = name;
  w.m.type = t;
  w.m.rows = rows;
  w.m.cols = cols;
  w.m.row_bytes = row_size(t, cols);
  w.data.resize(w.m.bytes());
  w.deq.resize(size_t(rows * cols));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> src(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : src) v = dist(rng);
    kernels::quantize_row(t, src.data(), w.data.data() + r * w.m.row_bytes, cols);
    kernels::dequantize_row(t, w.data.data() + r * w.m.row_bytes, &w.deq[size_t(r * cols)], cols);
  }
  w.m.data = w.data.data();
  return w;
}

// deq again after a test edits the stored bytes (ggml layout only).
void refresh(Tensor& w) {
  for (int64_t r = 0; r < w.m.rows; ++r)
    kernels::dequantize_row(w.m.type, w.data.data() + r * w.m.row_bytes,
                            &w.deq[size_t(r * w.m.cols)], w.m.cols);
}

void pack(Tensor& w) {
  kernels::pack_rows(w.m.type, w.data.data(), w.m.row_bytes, w.m.rows, w.m.cols);
  w.m.layout = kernels::WeightLayout::packed16;
}

struct Layer {
  MoeShape s;
  Tensor router, gate, up, down;
  MoeLayerWeights w() const { return {router.m, gate.m, up.m, down.m}; }
};

// The router is f32 as in real files (quantizers keep ffn_gate_inp so).
Layer make_layer(GgmlType t, int dim, int n_expert, int n_used, int ffn, uint32_t seed = 1) {
  Layer L;
  L.s = {dim, n_expert, n_used, ffn, true, 0.0f};
  L.router = make_tensor("blk.0.ffn_gate_inp.weight", GgmlType::F32, n_expert, dim, 0.2f, seed);
  L.gate =
      make_tensor("blk.0.ffn_gate_exps.weight", t, int64_t(n_expert) * ffn, dim, 0.1f, seed + 1);
  L.up = make_tensor("blk.0.ffn_up_exps.weight", t, int64_t(n_expert) * ffn, dim, 0.1f, seed + 2);
  L.down =
      make_tensor("blk.0.ffn_down_exps.weight", t, int64_t(n_expert) * dim, ffn, 0.1f, seed + 3);
  return L;
}

std::vector<float> make_x(int B, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(B) * dim);
  for (auto& v : x) v = dist(rng);
  return x;
}

// The block in plain floats and doubles, from the dequantized weights.
std::vector<float> reference(const Layer& L, const std::vector<float>& x, int B) {
  const auto& s = L.s;
  std::vector<float> out(size_t(B) * s.dim, 0.0f);
  for (int t = 0; t < B; ++t) {
    const float* xt = &x[size_t(t) * s.dim];
    std::vector<double> p(s.n_expert);
    double mx = -1e300;
    for (int e = 0; e < s.n_expert; ++e) {
      double d = 0;
      for (int i = 0; i < s.dim; ++i) d += double(L.router.deq[size_t(e) * s.dim + i]) * xt[i];
      p[e] = d;
      mx = std::max(mx, d);
    }
    double z = 0;
    for (auto& v : p) z += (v = std::exp(v - mx));
    std::vector<int> order(s.n_expert);
    for (int e = 0; e < s.n_expert; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double wsum = 0;
    for (int r = 0; r < s.n_used; ++r) wsum += p[order[r]] / z;
    for (int r = 0; r < s.n_used; ++r) {
      const int e = order[r];
      const double wt = p[e] / z / wsum;
      std::vector<double> h(s.expert_ffn);
      for (int j = 0; j < s.expert_ffn; ++j) {
        double g = 0, u = 0;
        const size_t row = (size_t(e) * s.expert_ffn + j) * s.dim;
        for (int i = 0; i < s.dim; ++i) {
          g += double(L.gate.deq[row + i]) * xt[i];
          u += double(L.up.deq[row + i]) * xt[i];
        }
        h[j] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int i = 0; i < s.dim; ++i) {
        double y = 0;
        const size_t row = (size_t(e) * s.dim + i) * s.expert_ffn;
        for (int j = 0; j < s.expert_ffn; ++j) y += double(L.down.deq[row + j]) * h[j];
        out[size_t(t) * s.dim + i] += float(wt * y);
      }
    }
  }
  return out;
}

std::vector<float> run(const Layer& L, const std::vector<float>& x, int B,
                       runtime::ThreadPool& pool, MoeFfn* ffn = nullptr) {
  MoeFfn local;
  MoeFfn& f = ffn ? *ffn : local;
  std::vector<float> out(size_t(B) * L.s.dim, -1.0f);
  f.forward(L.w(), L.s, x.data(), B, out.data(), pool);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::fabs(double(got[i]) - want[i]));
    den = std::max(den, std::fabs(double(want[i])));
  }
  return num / den;
}

}  // namespace

TEST_CASE("route_tokens: softmax top-k, ties to the lower index, weights normalised") {
  MoeShape s{64, 6, 3, 64, true, 0.0f};
  // Token 0: experts 4 > 1 = 2 (a tie) > the rest. Token 1: 0 > 5 > 3.
  const float logits[] = {0.0f, 2.0f,  2.0f,  -1.0f, 3.0f, 0.5f,  //
                          4.0f, -2.0f, -2.0f, 1.0f,  0.0f, 2.5f};
  int32_t ex[6];
  float wt[6];
  route_tokens(logits, 2, s, ex, wt);
  CHECK(ex[0] == 4);
  CHECK(ex[1] == 1);
  CHECK(ex[2] == 2);
  CHECK(ex[3] == 0);
  CHECK(ex[4] == 5);
  CHECK(ex[5] == 3);
  for (int t = 0; t < 2; ++t)
    CHECK(wt[t * 3] + wt[t * 3 + 1] + wt[t * 3 + 2] == doctest::Approx(1));
  // exp(3) : exp(2) : exp(2), normalised.
  const double z = std::exp(3.0) + 2 * std::exp(2.0);
  CHECK(wt[0] == doctest::Approx(std::exp(3.0) / z).epsilon(1e-5));
  CHECK(wt[1] == wt[2]);

  s.norm_weights = false;
  s.weights_scale = 2.0f;
  route_tokens(logits, 2, s, ex, wt);
  double all = 0;
  for (int e = 0; e < 6; ++e) all += std::exp(double(logits[e]));
  CHECK(wt[0] == doctest::Approx(2 * std::exp(3.0) / all).epsilon(1e-5));
}

TEST_CASE("MoE block: equal to a float reference (f32, q8_0 and q4_k experts)") {
  auto pool = runtime::ThreadPool::unpinned(2);
  const int B = 5;
  auto x = make_x(B, 256, 9);
  struct Case {
    GgmlType t;
    double tol;  // quantized activations (q8) cost about 1% of a dot product
  };
  for (Case c :
       {Case{GgmlType::F32, 1e-5}, Case{GgmlType::Q8_0, 2e-2}, Case{GgmlType::Q4_K, 3e-2}}) {
    CAPTURE(traits(c.t).name);
    auto L = make_layer(c.t, 256, 8, 3, 256);
    auto got = run(L, x, B, pool);
    CHECK(max_rel_err(got, reference(L, x, B)) < c.tol);
  }
}

TEST_CASE("MoE block: a batch equals single tokens bit for bit, on 1 or 3 threads, any layout") {
  auto one = runtime::ThreadPool::unpinned(1);
  auto three = runtime::ThreadPool::unpinned(3);
  const int B = 7;
  auto x = make_x(B, 256, 3);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (bool packed : {false, true}) {
      CAPTURE(traits(t).name);
      CAPTURE(packed);
      auto L = make_layer(t, 256, 16, 4, 256, 5);
      if (packed) {
        pack(L.gate);
        pack(L.up);
        pack(L.down);
      }
      MoeFfn f;
      auto batch = run(L, x, B, three, &f);
      // 7 tokens x 4 experts of 16: several tokens share an expert.
      CHECK(f.last_distinct_experts() < B * 4);
      CHECK(same_bits(batch, run(L, x, B, one)));
      for (int t = 0; t < B; ++t) {
        std::vector<float> xt(x.begin() + t * 256, x.begin() + (t + 1) * 256);
        auto single = run(L, xt, 1, three);
        CHECK(std::memcmp(single.data(), &batch[size_t(t) * 256], 256 * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("MoE block: every ISA gives the scalar kernels' bits") {
  auto pool = runtime::ThreadPool::unpinned(2);
  auto x = make_x(3, 256, 4);
  auto L = make_layer(GgmlType::Q4_K, 256, 8, 2, 256, 11);
  const auto saved = kernels::active_isa();
  kernels::set_isa(kernels::Isa::scalar);
  auto want = run(L, x, 3, pool);
  for (int i = 1; i <= static_cast<int>(kernels::best_isa()); ++i) {
    kernels::set_isa(static_cast<kernels::Isa>(i));
    CAPTURE(kernels::isa_name(kernels::active_isa()));
    CHECK(same_bits(run(L, x, 3, pool), want));
  }
  kernels::set_isa(saved);
}

TEST_CASE("MoE block: the router decides which experts run, and top-k changes the output") {
  auto pool = runtime::ThreadPool::unpinned(2);
  auto x = make_x(1, 256, 6);
  auto L = make_layer(GgmlType::Q8_0, 256, 8, 2, 256, 21);
  MoeFfn f;
  auto base = run(L, x, 1, pool, &f);
  auto chosen = f.last_experts();
  REQUIRE(chosen.size() == 2);
  CHECK(f.bytes_read() ==
        L.router.m.bytes() + 2 * (L.gate.m.bytes() + L.up.m.bytes() + L.down.m.bytes()) / 8);

  // Point the router at two other experts (a large logit for each).
  int others[2], n = 0;
  for (int e = 0; e < 8 && n < 2; ++e)
    if (e != chosen[0] && e != chosen[1]) others[n++] = e;
  auto* r = reinterpret_cast<float*>(L.router.data.data());
  for (int e : others)
    for (int i = 0; i < 256; ++i) r[e * 256 + i] = x[i] * 0.05f;
  auto rerouted = run(L, x, 1, pool, &f);
  CHECK(f.last_experts() == std::vector<int32_t>{others[0], others[1]});
  CHECK_FALSE(same_bits(rerouted, base));

  // Experts the router no longer picks are not read: zeroing one changes nothing.
  std::fill(L.down.data.begin() + chosen[0] * L.down.m.row_bytes * 256,
            L.down.data.begin() + (chosen[0] + 1) * L.down.m.row_bytes * 256, 0);
  CHECK(same_bits(run(L, x, 1, pool), rerouted));

  refresh(L.router);
  refresh(L.down);
  L.s.n_used = 4;
  auto wider = run(L, x, 1, pool, &f);
  CHECK(f.last_experts().size() == 4);
  CHECK_FALSE(same_bits(wider, rerouted));
  CHECK(max_rel_err(wider, reference(L, x, 1)) < 2e-2);
}

TEST_CASE("check_moe_weights: names the tensor whose shape or layout does not fit") {
  auto L = make_layer(GgmlType::F32, 64, 4, 2, 40);
  CHECK_NOTHROW(check_moe_weights(L.w(), L.s));
  auto s = L.s;
  s.n_used = 5;
  CHECK_THROWS_WITH(check_moe_weights(L.w(), s),
                    doctest::Contains("5 experts used per token of 4"));
  s = L.s;
  s.expert_ffn = 64;
  CHECK_THROWS_WITH(check_moe_weights(L.w(), s), doctest::Contains("ffn_gate_exps"));
  // 40 rows an expert: the second expert would start inside a 16-row panel.
  auto w = L.w();
  w.up_exps.layout = kernels::WeightLayout::packed16;
  CHECK_THROWS_WITH(check_moe_weights(w, L.s), doctest::Contains("ffn_up_exps"));
}
