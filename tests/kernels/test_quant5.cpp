// Q5_0, Q5_1, Q5_K and MXFP4: ggml's block layouts (hand-built blocks decode
// to the values ggml's formulas give), the reference quantizers' error, and
// the matmuls: the canonical chains computed directly from the blocks, every
// ISA bit for bit, batches, odd shapes, and a double-precision dot product of
// the dequantized operands.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"

using namespace epyctune::engine;
using namespace epyctune::engine::kernels;
using namespace epyctune::engine::kernels::detail;

namespace {

const GgmlType kNew[] = {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q5_K, GgmlType::MXFP4};

const char* name(GgmlType t) {
  switch (t) {
    case GgmlType::Q5_0:
      return "q5_0";
    case GgmlType::Q5_1:
      return "q5_1";
    case GgmlType::Q5_K:
      return "q5_k";
    default:
      return "mxfp4";
  }
}

size_t row_bytes_of(GgmlType t, int64_t k) {
  Geometry g{};
  REQUIRE(geometry(t, g));
  return static_cast<size_t>(k / g.block_elems) * g.block_bytes;
}

std::vector<uint8_t> make_rows(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  const size_t rb = row_bytes_of(t, k);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    const float s = 0.05f * static_cast<float>(1 + r % 5);
    for (auto& v : src) v = dist(rng) * s + (r % 3 == 0 ? 0.02f : 0.0f);  // Q5_1 / Q5_K mins
    quantize_row(t, src.data(), w.data() + static_cast<size_t>(r) * rb, k);
  }
  return w;
}

std::vector<float> make_x(int n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = dist(rng);
  if (n > 1) x[static_cast<size_t>(k) + 5] = 30.0f;
  return x;
}

std::vector<float> run(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t k,
                       const std::vector<float>& x, int n) {
  Acts a;
  prepare_acts(t, x.data(), n, k, a);
  std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
  matmul_rows(t, w.data(), row_bytes_of(t, k), a, y.data(), rows, 0, rows);
  return y;
}

// Q8_0-record activation e of block b: quant and scale.
int act_q8(const uint8_t* row, int64_t b, int e, float& d) {
  const int L = static_cast<int>(b % 16);
  const uint8_t* rec = row + static_cast<size_t>(b / 16) * kQ8GroupBytes;
  d = reinterpret_cast<const float*>(rec + kQ8GroupD)[L];
  return reinterpret_cast<const int8_t*>(rec)[q8_group_pos(L, e)];
}

// The canonical chains, written from the blocks (convert_matmul.cpp's rules).
float chain_32(GgmlType t, const uint8_t* w, const uint8_t* a, int64_t nb) {
  float acc = 0.0f, accm = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int p = 0, s = 0;
    float da = 0.0f, dw = 0.0f, mw = 0.0f;
    for (int e = 0; e < 32; ++e) {
      const int qa = act_q8(a, b, e, da);
      int qw = 0;
      if (t == GgmlType::Q5_0) {
        const auto& blk = reinterpret_cast<const BlockQ5_0*>(w)[b];
        qw = q5_quant(blk.qs, blk.qh, e) - 16, dw = fp16_to_f32(blk.d);
      } else if (t == GgmlType::Q5_1) {
        const auto& blk = reinterpret_cast<const BlockQ5_1*>(w)[b];
        qw = q5_quant(blk.qs, blk.qh, e), dw = fp16_to_f32(blk.d), mw = fp16_to_f32(blk.m);
      } else {
        const auto& blk = reinterpret_cast<const BlockMxfp4*>(w)[b];
        const uint8_t byte = blk.qs[e % 16];
        qw = kMxfp4Values[e < 16 ? byte & 0xF : byte >> 4], dw = e8m0_half_to_f32(blk.e);
      }
      p += qw * qa;
      s += qa;
    }
    acc = std::fma(static_cast<float>(p), dw * da, acc);
    if (t == GgmlType::Q5_1) accm = std::fma(static_cast<float>(s), mw * da, accm);
  }
  return t == GgmlType::Q5_1 ? acc + accm : acc;
}

float chain_q5_k(const uint8_t* w, const uint8_t* a, int64_t nsb) {
  float acc[2] = {0.0f, 0.0f};
  for (int64_t b = 0; b < nsb; ++b) {
    const auto& blk = reinterpret_cast<const BlockQ5_K*>(w)[b];
    const uint8_t* rec = a + static_cast<size_t>(b / 2) * kQ4KPairBytes;
    const float da = reinterpret_cast<const float*>(rec + kQ4KPairD)[8 * (b % 2)];
    const float d = fp16_to_f32(blk.d);
    float sb[2] = {0.0f, 0.0f};
    int msum = 0;
    for (int j = 0; j < 8; ++j) {
      const int L = static_cast<int>(8 * (b % 2)) + j;
      uint8_t sc, m;
      q4k_scale_min(j, blk.scales, sc, m);
      int plo = 0, phi = 0, isum = 0;
      for (int e = 0; e < 32; ++e) {
        const int qa = reinterpret_cast<const int8_t*>(rec)[q4k_pair_pos(L, e)];
        const uint8_t byte = blk.qs[32 * (j / 2) + e];
        plo += ((j & 1) ? byte >> 4 : byte & 0xF) * qa;
        phi += 8 * ((blk.qh[e] >> j) & 1) * qa;
        isum += qa;
      }
      sb[0] = std::fma(static_cast<float>(plo), d * sc, sb[0]);
      sb[1] = std::fma(static_cast<float>(phi), (2.0f * d) * sc, sb[1]);
      msum += m * isum;
    }
    sb[0] = std::fma(-static_cast<float>(msum), fp16_to_f32(blk.dmin), sb[0]);
    sb[1] = std::fma(-0.0f, 0.0f, sb[1]);
    for (int h = 0; h < 2; ++h) acc[h] = std::fma(sb[h], da, acc[h]);
  }
  return acc[0] + acc[1];
}

}  // namespace

TEST_CASE("Q5_0 / Q5_1 / Q5_K / MXFP4 blocks decode as ggml's formulas say") {
  BlockQ5_0 q50{};
  q50.d = f32_to_fp16(0.5f);
  q50.qs[0] = 0x21;  // element 0: low nibble 1; element 16: high nibble 2
  q50.qh[0] = 0x01;  // element 0's fifth bit
  float y[256];
  dequantize_row(GgmlType::Q5_0, &q50, y, 32);
  CHECK(y[0] == 0.5f);    // (1 + 16 - 16) * 0.5
  CHECK(y[16] == -7.0f);  // (2 - 16) * 0.5
  CHECK(y[1] == -8.0f);   // (0 - 16) * 0.5
  BlockQ5_1 q51{};
  q51.d = f32_to_fp16(0.5f), q51.m = f32_to_fp16(1.0f);
  q51.qs[3] = 0x40, q51.qh[2] = 0x08;  // element 19: 4 + 16 (bit 19)
  dequantize_row(GgmlType::Q5_1, &q51, y, 32);
  CHECK(y[19] == 11.0f);
  CHECK(y[3] == 1.0f);
  BlockMxfp4 mx{};
  mx.e = 127;       // 2^-1: the values are doubled E2M1
  mx.qs[0] = 0x97;  // element 0: index 7 (12), element 16: index 9 (-1)
  dequantize_row(GgmlType::MXFP4, &mx, y, 32);
  CHECK(y[0] == 6.0f);
  CHECK(y[16] == -0.5f);
  CHECK(e8m0_half_to_f32(0) == std::ldexp(1.0f, -128));
  CHECK(e8m0_half_to_f32(1) == std::ldexp(1.0f, -127));
  BlockQ5_K k5{};
  k5.d = f32_to_fp16(1.0f), k5.dmin = f32_to_fp16(0.5f);
  k5.scales[0] = 2, k5.scales[4] = 3, k5.scales[2] = 1;
  k5.qs[0] = 0x05, k5.qh[0] = 0x01, k5.qh[3] = 0x04;
  dequantize_row(GgmlType::Q5_K, &k5, y, 256);
  CHECK(y[0] == 40.5f);   // 1 * 2 * (5 + 16) - 0.5 * 3
  CHECK(y[1] == -1.5f);   // 0 - 0.5 * 3
  CHECK(y[67] == 16.0f);  // sub-block 2 (scale 1), element 3, fifth bit = qh[3] bit 2
  CHECK(y[32] == 0.0f);   // sub-block 1: scale 0, min 0
}

TEST_CASE("the 5-bit and MXFP4 reference quantizers reconstruct within their precision") {
  const int64_t k = 512;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(k), back(k);
  for (auto& v : x) v = dist(rng);
  struct Case {
    GgmlType t;
    double tol;
  };
  for (auto c : {Case{GgmlType::Q5_0, 0.06}, Case{GgmlType::Q5_1, 0.06}, Case{GgmlType::Q5_K, 0.05},
                 Case{GgmlType::MXFP4, 0.2}}) {
    std::vector<uint8_t> q(row_bytes_of(c.t, k));
    quantize_row(c.t, x.data(), q.data(), k);
    dequantize_row(c.t, q.data(), back.data(), k);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < k; ++i) err += (x[i] - back[i]) * (x[i] - back[i]), ref += x[i] * x[i];
    INFO(name(c.t));
    CHECK(std::sqrt(err / ref) < c.tol);
  }
}

TEST_CASE("new types: matmul_rows equals the canonical chains, and every ISA bit for bit") {
  for (GgmlType t : kNew) {
    const bool kq = t == GgmlType::Q5_K;
    for (int64_t k : kq ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 416, 1056}) {
      const int64_t rows = 37;
      const int n = 9;
      auto w = make_rows(t, rows, k, 11);
      if (t == GgmlType::MXFP4) {
        w[row_bytes_of(t, k) * 3] = 100;  // a block scale outside fp16: row 3 takes the f32 path
        w[row_bytes_of(t, k) * 4] = 0;    // e = 0 with non-zero quants
      }
      const auto x = make_x(n, k, 12);
      set_isa(Isa::scalar);
      const auto ref = run(t, w, rows, k, x, n);
      Acts a;
      prepare_acts(t, x.data(), n, k, a);
      const size_t rb = row_bytes_of(t, k);
      for (int64_t r = 0; r < rows; ++r)
        for (int tk = 0; tk < n; ++tk) {
          const uint8_t* wr = w.data() + static_cast<size_t>(r) * rb;
          const float want =
              kq ? chain_q5_k(wr, a.row(tk), k / 256) : chain_32(t, wr, a.row(tk), k / 32);
          INFO(name(t), " k=", k, " row ", r, " token ", tk);
          REQUIRE(std::memcmp(&want, &ref[tk * rows + r], 4) == 0);
        }
      for (int i = 1; i <= static_cast<int>(best_isa()); ++i) {
        set_isa(static_cast<Isa>(i));
        const auto y = run(t, w, rows, k, x, n);
        INFO(name(t), " k=", k, " isa ", isa_name(static_cast<Isa>(i)));
        CHECK(std::memcmp(y.data(), ref.data(), y.size() * 4) == 0);
        // A batch of 1 gives each token's bits.
        for (int tk : {0, 8}) {
          std::vector<float> xt(x.begin() + tk * k, x.begin() + (tk + 1) * k);
          const auto y1 = run(t, w, rows, k, xt, 1);
          CHECK(std::memcmp(y1.data(), ref.data() + tk * rows, rows * 4) == 0);
        }
      }
      set_isa(best_isa());
    }
  }
}

TEST_CASE("new types agree with a double-precision dot of the dequantized operands") {
  for (GgmlType t : kNew) {
    const int64_t k = 1024, rows = 20;
    const int n = 3;
    const auto w = make_rows(t, rows, k, 21);
    std::vector<float> x(static_cast<size_t>(n * k));
    std::mt19937 rng(22);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto& v : x) v = dist(rng);
    const auto y = run(t, w, rows, k, x, n);
    std::vector<float> wd(static_cast<size_t>(k));
    for (int tk = 0; tk < n; ++tk) {
      // Against the float activations: their 8-bit quantization is the slack.
      const float* xd = x.data() + tk * k;
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t, w.data() + static_cast<size_t>(r) * row_bytes_of(t, k), wd.data(), k);
        double dot = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i)
          dot += double(wd[i]) * xd[i], mag += std::fabs(double(wd[i]) * xd[i]);
        INFO(name(t), " row ", r, " token ", tk);
        CHECK(std::fabs(y[tk * rows + r] - dot) <= 5e-3 * mag + 1e-5);
      }
    }
  }
}
