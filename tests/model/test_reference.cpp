// The forward pass against a naive, independent f64 implementation of the
// llama architecture (non-NeoX RoPE on adjacent pairs, GQA, SwiGLU) on an f32
// model: catches convention errors that batch-vs-single checks cannot.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/gguf/gguf.hpp"
#include "engine/kernels/kernels.hpp"
#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

struct RefModel {
  LlamaConfig c;
  const gguf::File* f;
  std::vector<std::vector<std::vector<double>>> kcache, vcache;  // [layer][pos][kv_dim]

  std::vector<double> mat(const std::string& name, const std::vector<double>& x) const {
    const auto* t = f->tensor(name);
    REQUIRE(t);
    REQUIRE(t->type == GgmlType::F32);
    const float* w = reinterpret_cast<const float*>(t->data);
    std::vector<double> y(t->ne[1], 0.0);
    for (int64_t r = 0; r < t->ne[1]; ++r)
      for (int64_t i = 0; i < t->ne[0]; ++i) y[r] += double(w[r * t->ne[0] + i]) * x[i];
    return y;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::string& wname) const {
    const float* w = reinterpret_cast<const float*>(f->tensor(wname)->data);
    double ss = 0;
    for (double v : x) ss += v * v;
    double s = 1.0 / std::sqrt(ss / x.size() + c.norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
  }
  void rope(double* h, int pos) const {
    for (int i = 0; i < c.n_rot / 2; ++i) {
      double theta = pos * std::pow(double(c.rope_freq_base), -2.0 * i / c.n_rot);
      double cs = std::cos(theta), sn = std::sin(theta);
      double a = h[2 * i], b = h[2 * i + 1];
      h[2 * i] = a * cs - b * sn;
      h[2 * i + 1] = a * sn + b * cs;
    }
  }
  std::vector<double> step(int tok) {
    const int pos = static_cast<int>(kcache.empty() ? 0 : kcache[0].size());
    if (kcache.empty()) kcache.resize(c.n_layers), vcache.resize(c.n_layers);
    const auto* e = f->tensor("token_embd.weight");
    std::vector<double> x(c.dim);
    for (int i = 0; i < c.dim; ++i)
      x[i] = reinterpret_cast<const float*>(e->data)[size_t(tok) * c.dim + i];
    const int hd = c.head_dim, grp = c.n_heads / c.n_kv_heads;
    for (int l = 0; l < c.n_layers; ++l) {
      auto n = [l](const char* s) { return "blk." + std::to_string(l) + "." + s + ".weight"; };
      auto xn = norm(x, n("attn_norm"));
      auto q = mat(n("attn_q"), xn), k = mat(n("attn_k"), xn), v = mat(n("attn_v"), xn);
      for (int h = 0; h < c.n_heads; ++h) rope(&q[h * hd], pos);
      for (int h = 0; h < c.n_kv_heads; ++h) rope(&k[h * hd], pos);
      kcache[l].push_back(k);
      vcache[l].push_back(v);
      std::vector<double> att(c.dim, 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        int g = h / grp;
        std::vector<double> s(pos + 1);
        double mx = -1e300;
        for (int j = 0; j <= pos; ++j) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[h * hd + i] * kcache[l][j][g * hd + i];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& v2 : s) sum += (v2 = std::exp(v2 - mx));
        for (int j = 0; j <= pos; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * vcache[l][j][g * hd + i];
      }
      auto o = mat(n("attn_output"), att);
      for (int i = 0; i < c.dim; ++i) x[i] += o[i];
      xn = norm(x, n("ffn_norm"));
      auto gt = mat(n("ffn_gate"), xn), up = mat(n("ffn_up"), xn);
      for (size_t i = 0; i < gt.size(); ++i) gt[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
      auto d = mat(n("ffn_down"), gt);
      for (int i = 0; i < c.dim; ++i) x[i] += d[i];
    }
    return mat("output.weight", norm(x, "output_norm.weight"));
  }
};

}  // namespace

TEST_CASE("forward matches a naive f64 llama implementation (f32 weights, f32 KV)") {
  TempDir dir;
  auto path = make_model(dir, "tiny", "f32");
  auto pool = runtime::ThreadPool::unpinned(2);
  ModelOptions o;
  o.kv_type = GgmlType::F32;
  auto m = LlamaModel::load(path, pool, o);
  RefModel ref{m->config(), &m->file(), {}, {}};
  const int V = m->n_vocab();
  std::vector<int32_t> toks{1, 300, 17, 42, 511, 8, 99};
  std::vector<float> got(size_t(V) * toks.size());
  m->forward(toks, got.data());
  double max_err = 0, max_abs = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    auto want = ref.step(toks[t]);
    for (int i = 0; i < V; ++i) {
      max_err = std::max(max_err, std::abs(want[i] - got[t * V + i]));
      max_abs = std::max(max_abs, std::abs(want[i]));
    }
  }
  CAPTURE(max_err);
  CAPTURE(max_abs);
  CHECK(max_abs > 1.0);
  CHECK(max_err < 1e-3 * max_abs);
}
