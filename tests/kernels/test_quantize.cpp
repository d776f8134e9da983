// Dequantization of hand-made blocks (known bytes -> known floats), the fp16
// and bf16 conversions, and quantize -> dequantize error bounds per type.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"

using namespace epyctune::engine;
using namespace epyctune::engine::kernels;
using namespace epyctune::engine::kernels::detail;

namespace {

size_t row_bytes(GgmlType t, int64_t n) {
  Geometry g{};
  REQUIRE(geometry(t, g));
  return static_cast<size_t>(n / g.block_elems) * g.block_bytes;
}

std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST_CASE("fp16 and bf16 conversions are exact and round to nearest even") {
  CHECK(fp16_to_f32(0x3C00) == 1.0f);
  CHECK(fp16_to_f32(0xC000) == -2.0f);
  CHECK(fp16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(fp16_to_f32(0x7BFF) == 65504.0f);
  CHECK(std::isinf(fp16_to_f32(0x7C00)));
  CHECK(f32_to_fp16(1.0f) == 0x3C00);
  CHECK(f32_to_fp16(65504.0f) == 0x7BFF);
  CHECK(f32_to_fp16(65520.0f) == 0x7C00);               // tie rounds to even = inf
  CHECK(f32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even zero
  CHECK(f32_to_fp16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie, even stays
  CHECK(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie, odd rounds up
  // Every half value survives a round trip.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaN payloads
    REQUIRE(f32_to_fp16(fp16_to_f32(static_cast<uint16_t>(h))) == h);
  }
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(bits_f32(0x3F808000)) == 0x3F80);  // tie to even
  CHECK(f32_to_bf16(bits_f32(0x3F818000)) == 0x3F82);
}

TEST_CASE("dequantize hand-made Q4_0 and Q8_0 blocks") {
  BlockQ4_0 b4{};
  b4.d = 0x3800;                                 // 0.5
  for (int j = 0; j < 16; ++j) b4.qs[j] = 0x88;  // all zero after the -8 offset
  b4.qs[0] = 0x1F;
  b4.qs[15] = 0x80;
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q4_0, &b4, y.data(), 32);
  CHECK(y[0] == 3.5f);
  CHECK(y[16] == -3.5f);
  CHECK(y[15] == -4.0f);
  CHECK(y[31] == 0.0f);
  CHECK(y[5] == 0.0f);

  BlockQ8_0 b8{};
  b8.d = 0x4000;  // 2.0
  b8.qs[3] = -5;
  b8.qs[31] = 127;
  dequantize_row(GgmlType::Q8_0, &b8, y.data(), 32);
  CHECK(y[3] == -10.0f);
  CHECK(y[31] == 254.0f);
  CHECK(y[0] == 0.0f);
}

TEST_CASE("dequantize hand-made Q4_K and Q6_K blocks") {
  BlockQ4_K k4{};
  k4.d = 0x3C00;                // 1.0
  k4.dmin = 0x3800;             // 0.5
  k4.scales[0] = 2 | (1 << 6);  // sc0 = 2; bit 6-7 feed sc4's high bits
  k4.scales[4] = 3;             // m0 = 3
  k4.scales[1] = 7;             // sc1 = 7
  k4.scales[5] = 1;             // m1 = 1
  k4.scales[8] = 0x21;          // sc4 = 1 | (1 << 4) = 17, m4 = 2
  k4.qs[0] = 0x95;              // element 0 = 5, element 32 = 9
  k4.qs[64] = 0x03;             // element 128 = 3 (sub-block 4)
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q4_K, &k4, y.data(), 256);
  CHECK(y[0] == 1.0f * 2 * 5 - 0.5f * 3);
  CHECK(y[1] == -1.5f);
  CHECK(y[32] == 7.0f * 9 - 0.5f);
  CHECK(y[128] == 17.0f * 3 - 1.0f);

  BlockQ6_K k6{};
  k6.d = 0x3400;  // 0.25
  for (int i = 0; i < 16; ++i) k6.scales[i] = 1;
  k6.scales[0] = 4;
  k6.scales[4] = -3;
  k6.ql[0] = 0x21;         // element 0 low = 1, element 64 low = 2
  k6.qh[0] = 0x02 | 0x30;  // element 0 high = 2, element 64 high = 3
  dequantize_row(GgmlType::Q6_K, &k6, y.data(), 256);
  CHECK(y[0] == 0.25f * 4 * ((1 | (2 << 4)) - 32));
  CHECK(y[64] == 0.25f * -3 * ((2 | (3 << 4)) - 32));
  CHECK(y[1] == 0.25f * 4 * -32);
  CHECK(y[200] == 0.25f * 1 * -32);
}

TEST_CASE("quantize Q4_0 and Q8_0 produce ggml's reference bytes") {
  std::vector<float> x(32, 0.0f);
  x[0] = -4.0f;  // absmax, negative -> d = max / -8 = 0.5
  x[1] = 1.0f;
  x[16] = 3.4f;
  BlockQ4_0 b{};
  quantize_row(GgmlType::Q4_0, x.data(), &b, 32);
  CHECK(b.d == 0x3800);
  // id = 1/d = 2: q = trunc(x * 2 + 8.5) clamped to 15.
  CHECK((b.qs[0] & 0xF) == 0);   // -4 * 2 + 8.5 = 0.5 -> 0
  CHECK((b.qs[1] & 0xF) == 10);  // 1 * 2 + 8.5 = 10.5 -> 10
  CHECK((b.qs[0] >> 4) == 15);   // 3.4 * 2 + 8.5 = 15.3 -> 15
  CHECK((b.qs[2] & 0xF) == 8);

  std::vector<float> x8(32, 0.0f);
  x8[0] = 127.0f;
  x8[1] = -63.5f;  // roundf rounds half away from zero
  x8[2] = 0.5f;
  BlockQ8_0 b8{};
  quantize_row(GgmlType::Q8_0, x8.data(), &b8, 32);
  CHECK(b8.d == 0x3C00);
  CHECK(b8.qs[0] == 127);
  CHECK(b8.qs[1] == -64);
  CHECK(b8.qs[2] == 1);
}

TEST_CASE("quantize -> dequantize stays within each type's error bound") {
  const int64_t n = 4096;
  const auto x = gaussian(n, 7);
  struct Case {
    GgmlType t;
    double rel_rms;
  };
  // Bounds well above what ggml's quantizers achieve on Gaussian data, far
  // below what a wrong layout or scale would give.
  for (const Case c :
       {Case{GgmlType::F32, 0.0}, Case{GgmlType::F16, 5e-4}, Case{GgmlType::BF16, 4e-3},
        Case{GgmlType::Q8_0, 0.01}, Case{GgmlType::Q4_0, 0.13}, Case{GgmlType::Q4_K, 0.10},
        Case{GgmlType::Q6_K, 0.03}, Case{GgmlType::Q8_K, 0.01}}) {
    CAPTURE(static_cast<int>(c.t));
    std::vector<uint8_t> q(row_bytes(c.t, n));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(c.t, x.data(), q.data(), n);
    dequantize_row(c.t, q.data(), y.data(), n);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; ++i) {
      se += (x[i] - y[i]) * double(x[i] - y[i]);
      sx += x[i] * double(x[i]);
    }
    CHECK(std::sqrt(se / sx) <= c.rel_rms);
    if (c.t != GgmlType::F32) CHECK(se > 0);
  }
  // Q4_0 / Q8_0 per-element bounds: |err| <= d (Q4_0 clamps the +8 end) and
  // d/2 plus the fp16 rounding of d (ggml quantizes with the fp32 d).
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    std::vector<uint8_t> q4(row_bytes(GgmlType::Q4_0, 32)), q8(row_bytes(GgmlType::Q8_0, 32));
    float y4[32], y8[32];
    quantize_row(GgmlType::Q4_0, &x[b * 32], q4.data(), 32);
    dequantize_row(GgmlType::Q4_0, q4.data(), y4, 32);
    quantize_row(GgmlType::Q8_0, &x[b * 32], q8.data(), 32);
    dequantize_row(GgmlType::Q8_0, q8.data(), y8, 32);
    for (int j = 0; j < 32; ++j) {
      REQUIRE(std::fabs(y4[j] - x[b * 32 + j]) <= amax / 8 * 1.01f);
      REQUIRE(std::fabs(y8[j] - x[b * 32 + j]) <= amax / 127 * 0.57f);
    }
  }
}

TEST_CASE("quantizers handle all-zero blocks and reject bad sizes") {
  std::vector<float> z(256, 0.0f), y(256, 1.0f);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> q(row_bytes(t, 256), 0xAB);
    quantize_row(t, z.data(), q.data(), 256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (float v : y) REQUIRE(v == 0.0f);
  }
  std::vector<uint8_t> q(1024);
  CHECK_THROWS_AS(quantize_row(GgmlType::Q4_0, z.data(), q.data(), 31), std::invalid_argument);
  CHECK_THROWS_AS(dequantize_row(GgmlType::Q4_K, q.data(), y.data(), 128), std::invalid_argument);
}

TEST_CASE("Q4_K min-max scales: valid blocks, close to ggml's searched scales") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n = 256 * 16;
  std::vector<float> x(n), a(n), b(n);
  for (auto& v : x) v = dist(rng);
  std::vector<uint8_t> qa(n / 256 * 144), qb(qa.size());
  quantize_row(GgmlType::Q4_K, x.data(), qa.data(), n, QuantSearch::ggml);
  quantize_row(GgmlType::Q4_K, x.data(), qb.data(), n, QuantSearch::minmax);
  std::vector<uint8_t> qd(qa.size());
  quantize_row(GgmlType::Q4_K, x.data(), qd.data(), n);
  CHECK(qd == qa);  // the default is ggml's search
  CHECK(qa != qb);
  dequantize_row(GgmlType::Q4_K, qa.data(), a.data(), n);
  dequantize_row(GgmlType::Q4_K, qb.data(), b.data(), n);
  double ea = 0, eb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ea += (a[i] - x[i]) * (a[i] - x[i]);
    eb += (b[i] - x[i]) * (b[i] - x[i]);
  }
  ea = std::sqrt(ea / n);
  eb = std::sqrt(eb / n);
  MESSAGE("Q4_K rmse: ggml search " << ea << ", min-max " << eb);
  CHECK(ea <= eb);       // the search does help
  CHECK(eb < 0.12);      // 4-bit on unit normals: ~0.1
  CHECK(eb < 1.3 * ea);  // and min-max is not far behind
}

TEST_CASE("prepare_acts_rows in pieces writes prepare_acts' bytes; rows out of range throw") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int n = 5;
  const int64_t k = 512;
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = dist(rng);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K,
                     GgmlType::F16}) {
    CAPTURE(static_cast<int>(t));
    Acts whole, pieces;
    prepare_acts(t, x.data(), n, k, whole);
    prepare_acts_shape(t, n, k, pieces);
    CHECK(pieces.row_bytes == whole.row_bytes);
    // Out of order, as pool threads may run them.
    prepare_acts_rows(x.data(), 3, 5, pieces);
    prepare_acts_rows(x.data(), 0, 1, pieces);
    prepare_acts_rows(x.data(), 1, 3, pieces);
    CHECK(std::memcmp(whole.data.data(), pieces.data.data(), whole.row_bytes * n) == 0);
    CHECK_THROWS_AS(prepare_acts_rows(x.data(), 4, 6, pieces), std::out_of_range);
  }
}
