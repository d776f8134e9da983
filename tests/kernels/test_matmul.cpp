// matmul_rows against a double-precision reference, and bit-for-bit equality
// of every available ISA with the scalar oracle (the determinism guarantee).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"

using namespace epyctune::engine;
using namespace epyctune::engine::kernels;
using namespace epyctune::engine::kernels::detail;

namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};

struct Weights {
  GgmlType t;
  int64_t rows, k;
  size_t row_bytes;
  std::vector<uint8_t> data;
  std::vector<float> deq;  // dequantized, rows x k
};

Weights make_weights(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  Geometry g{};
  REQUIRE(geometry(t, g));
  Weights w{t, rows, k, static_cast<size_t>(k / g.block_elems) * g.block_bytes, {}, {}};
  w.data.resize(w.row_bytes * static_cast<size_t>(rows));
  w.deq.resize(static_cast<size_t>(rows * k));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = 0.05f * static_cast<float>(1 + r % 5);
    for (auto& v : src) v = dist(rng) * row_scale;
    quantize_row(t, src.data(), w.data.data() + r * w.row_bytes, k);
    dequantize_row(t, w.data.data() + r * w.row_bytes, w.deq.data() + r * k, k);
  }
  return w;
}

std::vector<float> make_x(int n_tokens, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * k));
  for (auto& v : x) v = dist(rng);
  // One token row with a large outlier, one all-zero block.
  if (n_tokens > 1) x[static_cast<size_t>(k) + 3] = 40.0f;
  for (int i = 0; i < 32 && i < k; ++i) x[i] = 0.0f;
  return x;
}

// The activation values the kernels really multiply (dequantized from Acts),
// and each one's quantization step d (0 for float activations).
std::vector<double> act_values(const Acts& a, int t, std::vector<double>& step) {
  std::vector<double> v(static_cast<size_t>(a.k));
  step.assign(static_cast<size_t>(a.k), 0.0);
  const uint8_t* row = a.row(t);
  if (a.vec_type == GgmlType::Q8_0) {
    for (int64_t i = 0; i < a.k; ++i) {
      const int64_t b = i / 32;
      const int L = static_cast<int>(b % 16), e = static_cast<int>(i % 32);
      const uint8_t* rec = row + (b / 16) * kQ8GroupBytes;
      const auto* q = reinterpret_cast<const int8_t*>(rec);
      const auto* d = reinterpret_cast<const float*>(rec + kQ8GroupD);
      v[i] = double(q[q8_group_pos(L, e)]) * d[L];
      step[i] = d[L];
    }
  } else if (a.weight_type == GgmlType::Q4_K) {
    for (int64_t i = 0; i < a.k; ++i) {
      const int64_t b = i / 256;
      const int L = static_cast<int>(8 * (b % 2) + (i % 256) / 32), e = static_cast<int>(i % 32);
      const uint8_t* rec = row + (b / 2) * kQ4KPairBytes;
      const auto* q = reinterpret_cast<const int8_t*>(rec);
      const auto* d = reinterpret_cast<const float*>(rec + kQ4KPairD);
      v[i] = double(q[q4k_pair_pos(L, e)]) * d[L];
      step[i] = d[L];
    }
  } else if (a.vec_type == GgmlType::Q8_K) {
    for (int64_t i = 0; i < a.k; ++i) {
      const uint8_t* rec = row + (i / 256) * kKBlockBytes;
      const auto* q = reinterpret_cast<const int16_t*>(rec);
      const float d = *reinterpret_cast<const float*>(rec + kKBlockD);
      v[i] = double(q[i % 256]) * d;
      step[i] = d;
    }
  } else {
    const auto* x = reinterpret_cast<const float*>(row);
    for (int64_t i = 0; i < a.k; ++i) v[i] = x[i];
  }
  return v;
}

std::vector<float> run(const Weights& w, const Acts& acts, int64_t ldy) {
  std::vector<float> y(static_cast<size_t>(ldy * acts.n_tokens), -777.0f);
  // Two disjoint row ranges, as two threads would call it.
  const int64_t mid = w.rows / 2;
  matmul_rows(w.t, w.data.data(), w.row_bytes, acts, y.data(), ldy, 0, mid);
  matmul_rows(w.t, w.data.data(), w.row_bytes, acts, y.data(), ldy, mid, w.rows);
  return y;
}

// The scalar oracle's result for x; acts are left prepared on the scalar ISA
// (the reference bytes the other ISAs' activations must match).
std::vector<float> scalar_ref(const Weights& w, const std::vector<float>& x, int n_tokens,
                              int64_t k, int64_t ldy, Acts& acts) {
  set_isa(Isa::scalar);
  prepare_acts(w.t, x.data(), n_tokens, k, acts);
  return run(w, acts, ldy);
}

std::vector<int64_t> ks_for(GgmlType t) {
  if (t == GgmlType::Q4_K || t == GgmlType::Q6_K) return {256, 512, 768, 1280};
  if (t == GgmlType::Q4_0 || t == GgmlType::Q8_0) return {32, 64, 96, 544, 1056};
  return {32, 48, 96, 100, 288};
}

}  // namespace

TEST_CASE("matmul_rows matches a double-precision reference") {
  const Isa saved = active_isa();
  set_isa(Isa::scalar);
  for (GgmlType t : kTypes) {
    for (int64_t k : ks_for(t)) {
      const int64_t rows = 7;
      const int n_tokens = 3;
      CAPTURE(static_cast<int>(t));
      CAPTURE(k);
      const Weights w = make_weights(t, rows, k, 11 + static_cast<uint32_t>(k));
      const auto x = make_x(n_tokens, k, 5);
      Acts acts;
      prepare_acts(t, x.data(), n_tokens, k, acts);
      const auto y = run(w, acts, rows);
      for (int tok = 0; tok < n_tokens; ++tok) {
        std::vector<double> step;
        const auto a = act_values(acts, tok, step);
        for (int64_t r = 0; r < rows; ++r) {
          double ref = 0, mag = 0, ref_x = 0, bound_x = 0;
          for (int64_t i = 0; i < k; ++i) {
            ref += w.deq[r * k + i] * a[i];
            mag += std::fabs(w.deq[r * k + i] * a[i]);
            ref_x += w.deq[r * k + i] * double(x[tok * k + i]);
            // Rounding to nearest: each activation is off by at most d/2.
            bound_x += std::fabs(w.deq[r * k + i]) * (0.5 * step[i] * 1.001);
          }
          const float got = y[tok * rows + r];
          // Against the quantized activations: only float rounding differs.
          REQUIRE(std::fabs(got - ref) <= 1e-5 * mag + 1e-30);
          // Against the original activations: activation quantization error.
          REQUIRE(std::fabs(got - ref_x) <= bound_x + 1e-5 * mag + 1e-30);
        }
      }
    }
  }
  set_isa(saved);
}

TEST_CASE("every ISA gives bit-identical results to the scalar oracle") {
  const Isa saved = active_isa();
  std::vector<Isa> isas;
  for (int i = 1; i <= static_cast<int>(best_isa()); ++i) isas.push_back(static_cast<Isa>(i));
  MESSAGE("best ISA on this CPU: " << std::string(isa_name(best_isa())));
  for (GgmlType t : kTypes) {
    for (int64_t k : ks_for(t)) {
      for (int64_t rows : {1, 3, 17}) {
        CAPTURE(static_cast<int>(t));
        CAPTURE(k);
        CAPTURE(rows);
        const Weights w = make_weights(t, rows, k, 3 + static_cast<uint32_t>(rows * k));
        for (int n_tokens : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 33}) {
          if (rows == 17 && n_tokens > 9 && n_tokens != 33) continue;  // keep ASan runs short
          CAPTURE(n_tokens);
          const auto x = make_x(n_tokens, k, 9 + static_cast<uint32_t>(n_tokens));
          const int64_t ldy = rows + 5;
          Acts acts;
          const auto ref = scalar_ref(w, x, n_tokens, k, ldy, acts);
          for (Isa isa : isas) {
            const std::string isa_str = isa_name(isa);
            CAPTURE(isa_str);
            set_isa(isa);
            Acts acts_isa;
            prepare_acts(t, x.data(), n_tokens, k, acts_isa);
            REQUIRE(acts_isa.row_bytes == acts.row_bytes);
            REQUIRE(std::memcmp(acts_isa.data.data(), acts.data.data(),
                                acts.row_bytes * static_cast<size_t>(n_tokens)) == 0);
            const auto got = run(w, acts_isa, ldy);
            REQUIRE(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
  set_isa(saved);
}

TEST_CASE("Q6_K row tiles: 32-row blocks, 8-group segments and row splits keep the oracle's bits") {
  const Isa saved = active_isa();
  const GgmlType t = GgmlType::Q6_K;
  // 10 and 17 super-blocks: two and three segments; 70 rows: three blocks.
  for (int64_t k : {2560, 4352}) {
    const int64_t rows = k == 2560 ? 70 : 33;
    CAPTURE(k);
    const Weights w = make_weights(t, rows, k, 41 + static_cast<uint32_t>(k));
    for (int n_tokens : {1, 4, 5, 8, 9}) {
      CAPTURE(n_tokens);
      const auto x = make_x(n_tokens, k, 13 + static_cast<uint32_t>(n_tokens));
      const int64_t ldy = rows + 1;
      Acts acts;
      const auto ref = scalar_ref(w, x, n_tokens, k, ldy, acts);
      set_isa(best_isa());
      for (int64_t split : {int64_t{0}, int64_t{1}, rows / 2, rows - 1}) {
        CAPTURE(split);
        std::vector<float> y(static_cast<size_t>(ldy * n_tokens), -777.0f);
        matmul_rows(t, w.data.data(), w.row_bytes, acts, y.data(), ldy, 0, split);
        matmul_rows(t, w.data.data(), w.row_bytes, acts, y.data(), ldy, split, rows);
        REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
  set_isa(saved);
}

TEST_CASE("batched tokens equal single-token passes bit for bit") {
  for (GgmlType t : kTypes) {
    const int64_t k = ks_for(t).back();
    const Weights w = make_weights(t, 5, k, 77);
    const auto x = make_x(8, k, 13);
    Acts all;
    prepare_acts(t, x.data(), 8, k, all);
    const auto y = run(w, all, 5);
    for (int tok = 0; tok < 8; ++tok) {
      Acts one;
      prepare_acts(t, x.data() + tok * k, 1, k, one);
      const auto y1 = run(w, one, 5);
      REQUIRE(std::memcmp(y1.data(), y.data() + tok * 5, 5 * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("matmul_rows rejects activations prepared for another type") {
  const Weights w = make_weights(GgmlType::Q4_0, 2, 64, 1);
  std::vector<float> x(64, 1.0f);
  Acts acts;
  prepare_acts(GgmlType::Q8_0, x.data(), 1, 64, acts);
  std::vector<float> y(2);
  CHECK_THROWS_AS(matmul_rows(GgmlType::Q4_0, w.data.data(), w.row_bytes, acts, y.data(), 2, 0, 2),
                  std::invalid_argument);
  CHECK_THROWS_AS(prepare_acts(GgmlType::Q4_K, x.data(), 1, 64, acts), std::invalid_argument);
  CHECK_THROWS(set_isa(static_cast<Isa>(static_cast<int>(best_isa()) + 1)));
}

TEST_CASE("packed16 Q4_0/Q8_0 panels: a byte permutation that pack/unpack undo") {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    for (int64_t k : {32, 512, 544, 1056}) {
      for (int64_t rows : {3, 16, 35}) {
        CAPTURE(static_cast<int>(t));
        CAPTURE(k);
        CAPTURE(rows);
        const Weights w = make_weights(t, rows, k, 21);
        auto p = w.data;
        pack_rows(t, p.data(), w.row_bytes, rows, k);
        // Whole panels move; the rows after the last one stay as they are.
        const size_t tail = static_cast<size_t>(rows / 16 * 16) * w.row_bytes;
        CHECK(std::equal(p.begin() + static_cast<std::ptrdiff_t>(tail), p.end(),
                         w.data.begin() + static_cast<std::ptrdiff_t>(tail)));
        CHECK((p == w.data) == (rows < 16));
        auto sorted_a = w.data, sorted_b = p;
        std::sort(sorted_a.begin(), sorted_a.end());
        std::sort(sorted_b.begin(), sorted_b.end());
        CHECK(sorted_a == sorted_b);
        unpack_rows(t, p.data(), w.row_bytes, rows, k);
        CHECK(p == w.data);
      }
    }
  }
  // Row 0 of a panel: its block b's scale is the panel block's first fp16.
  const Weights w = make_weights(GgmlType::Q4_0, 16, 64, 4);
  auto p = w.data;
  pack_rows(GgmlType::Q4_0, p.data(), w.row_bytes, 16, 64);
  CHECK(std::memcmp(p.data() + 16 * 18, w.data.data() + 18, 2) == 0);
  CHECK(std::memcmp(p.data() + 16 * 18 + 2, w.data.data() + w.row_bytes + 18, 2) == 0);
  CHECK(std::memcmp(p.data() + 16 * 18 + 32 + 64 + 4, w.data.data() + w.row_bytes + 18 + 6, 4) ==
        0);
  std::vector<uint8_t> padded(16 * 40);
  CHECK_THROWS_AS(pack_rows(GgmlType::Q4_0, padded.data(), 40, 16, 64), std::invalid_argument);
  std::vector<uint8_t> f(210);
  CHECK_THROWS_AS(pack_rows(GgmlType::Q6_K, f.data(), 210, 1, 256), std::invalid_argument);
  CHECK(has_packed_layout(GgmlType::Q4_0));
  CHECK(has_packed_layout(GgmlType::Q4_K));
  CHECK_FALSE(has_packed_layout(GgmlType::Q6_K));
}

TEST_CASE("packed16 Q4_K panels: pack/unpack undo each other, on arbitrary bytes") {
  const GgmlType t = GgmlType::Q4_K;
  for (int64_t k : {256, 512, 768}) {
    for (int64_t rows : {3, 16, 35}) {
      CAPTURE(k);
      CAPTURE(rows);
      const Weights w = make_weights(t, rows, k, 31);
      auto p = w.data;
      pack_rows(t, p.data(), w.row_bytes, rows, k);
      CHECK((p == w.data) == (rows < 16));
      unpack_rows(t, p.data(), w.row_bytes, rows, k);
      CHECK(p == w.data);
      std::mt19937 rng(static_cast<uint32_t>(k + rows));
      std::vector<uint8_t> r(w.data.size());
      for (auto& b : r) b = static_cast<uint8_t>(rng());
      auto q = r;
      pack_rows(t, q.data(), w.row_bytes, rows, k);
      unpack_rows(t, q.data(), w.row_bytes, rows, k);
      CHECK(q == r);
    }
  }
  // Vector q lane L is dword q of row L's block: row 3's scale bytes 4..7 of
  // super-block 1 sit in vector 2 of that block's panel slice.
  const Weights w = make_weights(t, 16, 512, 7);
  auto p = w.data;
  pack_rows(t, p.data(), w.row_bytes, 16, 512);
  CHECK(std::memcmp(p.data() + 2304 + 64 * 2 + 4 * 3, w.data.data() + 3 * w.row_bytes + 144 + 8,
                    4) == 0);
}

TEST_CASE("packed16 rows give the scalar oracle's bits on every ISA and row split") {
  const Isa saved = active_isa();
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    // Q4_0 / Q8_0: 8800 is 17 full groups (three segments) and a 3-block
    // tail. Q4_K: 256 and 2816 end in a lone super-block (11: five pairs
    // and one), 4608 is 9 pairs (two segments).
    const bool kq = t == GgmlType::Q4_K;
    for (int64_t k : kq ? std::vector<int64_t>{256, 512, 2816, 4608, 8960}
                        : std::vector<int64_t>{32, 544, 1056, 4128, 8800}) {
      for (int64_t rows : {1, 2, 3, 5, 7, 16, 37, 70}) {
        if ((k == 4128 || k == 4608) && rows > 7) continue;  // keep ASan runs short
        if ((k == 8800 || k == 8960) && rows != 3 && rows != 70) continue;
        CAPTURE(static_cast<int>(t));
        CAPTURE(k);
        CAPTURE(rows);
        const Weights w = make_weights(t, rows, k, 5 + static_cast<uint32_t>(rows * k));
        auto packed = w.data;
        pack_rows(t, packed.data(), w.row_bytes, rows, k);
        for (int n_tokens : {1, 2, 3, 4, 5, 8, 9, 17}) {
          if (rows > 7 && n_tokens != 1 && n_tokens != 8 && n_tokens != 9 &&
              !(rows == 37 && n_tokens == 3))
            continue;
          CAPTURE(n_tokens);
          const auto x = make_x(n_tokens, k, 3 + static_cast<uint32_t>(n_tokens));
          const int64_t ldy = rows + 3;
          Acts acts;
          const auto ref = scalar_ref(w, x, n_tokens, k, ldy, acts);
          for (int i = 0; i <= static_cast<int>(best_isa()); ++i) {
            const Isa isa = static_cast<Isa>(i);
            const std::string isa_str = isa_name(isa);
            CAPTURE(isa_str);
            set_isa(isa);
            // Splits at 16-row panels, the ggml-layout tail included.
            const std::vector<int64_t> splits = {0, rows / 32 * 16, rows / 16 * 16};
            for (int64_t split : splits) {
              CAPTURE(split);
              std::vector<float> y(static_cast<size_t>(ldy * n_tokens), -777.0f);
              matmul_rows(t, WeightLayout::packed16, packed.data(), w.row_bytes, acts, y.data(),
                          ldy, 0, split);
              matmul_rows(t, WeightLayout::packed16, packed.data(), w.row_bytes, acts, y.data(),
                          ldy, split, rows);
              REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
            }
          }
        }
      }
    }
  }
  set_isa(Isa::scalar);
  CHECK_FALSE(packed_layout_pays(GgmlType::Q4_0));
  set_isa(saved);
  if (best_isa() >= Isa::avx512) CHECK(packed_layout_pays(GgmlType::Q4_0));
  if (best_isa() >= Isa::avx512) CHECK(packed_layout_pays(GgmlType::Q4_K));
  CHECK_FALSE(packed_layout_pays(GgmlType::Q6_K));
  const Weights w = make_weights(GgmlType::Q6_K, 1, 256, 1);
  std::vector<float> x(256, 1.0f), y(1);
  Acts acts;
  prepare_acts(GgmlType::Q6_K, x.data(), 1, 256, acts);
  CHECK_THROWS_AS(matmul_rows(GgmlType::Q6_K, WeightLayout::packed16, w.data.data(), w.row_bytes,
                              acts, y.data(), 1, 0, 1),
                  std::invalid_argument);
  // Packed Q4_0 rows are read from the start of a 16-row panel.
  const Weights q = make_weights(GgmlType::Q4_0, 32, 64, 2);
  std::vector<float> x64(64, 1.0f), y32(32);
  prepare_acts(GgmlType::Q4_0, x64.data(), 1, 64, acts);
  CHECK_THROWS_AS(matmul_rows(GgmlType::Q4_0, WeightLayout::packed16, q.data.data(), q.row_bytes,
                              acts, y32.data(), 32, 8, 32),
                  std::invalid_argument);
  CHECK_NOTHROW(matmul_rows(GgmlType::Q4_0, WeightLayout::packed16, q.data.data(), q.row_bytes,
                            acts, y32.data(), 32, 16, 32));
}

// The one-token prefetch hint is chosen per CPU vendor (nta on AMD, t0
// elsewhere): it may change the speed, never a bit of the result.
TEST_CASE("either one-token prefetch hint keeps the oracle's bits") {
  const Isa saved = active_isa();
  const StreamHint saved_hint = stream_hint();
  CHECK(std::string(stream_hint_name(StreamHint::nta)) == "nta");
  CHECK(std::string(stream_hint_name(StreamHint::t0)) == "t0");
  CHECK(saved_hint == default_stream_hint());
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    CAPTURE(static_cast<int>(t));
    const int64_t k = t == GgmlType::Q4_K || t == GgmlType::Q6_K ? 2816 : 1056;
    const int64_t rows = 70;
    const Weights w = make_weights(t, rows, k, 11);
    auto packed = w.data;
    const bool has_packed = has_packed_layout(t);
    if (has_packed) pack_rows(t, packed.data(), w.row_bytes, rows, k);
    const auto x = make_x(1, k, 4);
    Acts acts;
    const auto ref = scalar_ref(w, x, 1, k, rows, acts);
    for (int i = 1; i <= static_cast<int>(best_isa()); ++i) {
      set_isa(static_cast<Isa>(i));
      const std::string isa_str = isa_name(static_cast<Isa>(i));
      CAPTURE(isa_str);
      for (StreamHint h : {StreamHint::nta, StreamHint::t0}) {
        set_stream_hint(h);
        REQUIRE(stream_hint() == h);
        const std::string hint_str = stream_hint_name(h);
        CAPTURE(hint_str);
        std::vector<float> y(static_cast<size_t>(rows), -777.0f);
        matmul_rows(t, WeightLayout::ggml, w.data.data(), w.row_bytes, acts, y.data(), rows, 0,
                    rows);
        REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
        if (!has_packed) continue;
        std::fill(y.begin(), y.end(), -777.0f);
        matmul_rows(t, WeightLayout::packed16, packed.data(), w.row_bytes, acts, y.data(), rows, 0,
                    rows);
        REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
  set_stream_hint(saved_hint);
  set_isa(saved);
}

// A verify pass of K drafts is K + 1 tokens: pairs of packed panels take up
// to 16 of them in one pass (9..16: the weights in registers, the tokens in
// groups of 4), then the rest. 70 rows: two pairs, whose second is cut at a
// split, and a ggml tail; 17 blocks: two activation records.
// AVX2 Q4_0 with 2+ tokens walks panels in groups (16 panels at 2..8
// tokens, 7 at 17), block by block: 277 rows are 17 panels and a ggml tail,
// so every token count here runs a second, shorter group after a full one,
// and 18 tokens a second chunk of one.
TEST_CASE("packed16 Q4_0 keeps the oracle's bits across panel groups") {
  const Isa saved = active_isa();
  const int64_t k = 544, rows = 277;
  const Weights w = make_weights(GgmlType::Q4_0, rows, k, 1234);
  auto packed = w.data;
  pack_rows(GgmlType::Q4_0, packed.data(), w.row_bytes, rows, k);
  for (int n_tokens : {2, 8, 9, 16, 17, 18}) {
    CAPTURE(n_tokens);
    const auto x = make_x(n_tokens, k, 41 + static_cast<uint32_t>(n_tokens));
    const int64_t ldy = rows + 1;
    Acts acts;
    const auto ref = scalar_ref(w, x, n_tokens, k, ldy, acts);
    for (int i = 1; i <= static_cast<int>(best_isa()); ++i) {
      set_isa(static_cast<Isa>(i));
      CAPTURE(std::string(isa_name(static_cast<Isa>(i))));
      for (int64_t split : {int64_t{0}, int64_t{128}}) {
        CAPTURE(split);
        std::vector<float> y(static_cast<size_t>(ldy * n_tokens), -777.0f);
        matmul_rows(GgmlType::Q4_0, WeightLayout::packed16, packed.data(), w.row_bytes, acts,
                    y.data(), ldy, 0, split);
        matmul_rows(GgmlType::Q4_0, WeightLayout::packed16, packed.data(), w.row_bytes, acts,
                    y.data(), ldy, split, rows);
        REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
  set_isa(saved);
}

TEST_CASE("packed16 Q4_0 / Q8_0 pairs keep the oracle's bits for 2..33 tokens") {
  const Isa saved = active_isa();
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    const int64_t k = 544, rows = 70;
    CAPTURE(static_cast<int>(t));
    const Weights w = make_weights(t, rows, k, 91 + static_cast<uint32_t>(t));
    auto packed = w.data;
    pack_rows(t, packed.data(), w.row_bytes, rows, k);
    for (int n_tokens = 2; n_tokens <= 33; ++n_tokens) {
      if (n_tokens > 18 && n_tokens != 32 && n_tokens != 33) continue;
      CAPTURE(n_tokens);
      const auto x = make_x(n_tokens, k, 17 + static_cast<uint32_t>(n_tokens));
      const int64_t ldy = rows + 3;
      Acts acts;
      const auto ref = scalar_ref(w, x, n_tokens, k, ldy, acts);
      for (int i = 1; i <= static_cast<int>(best_isa()); ++i) {
        const Isa isa = static_cast<Isa>(i);
        const std::string isa_str = isa_name(isa);
        CAPTURE(isa_str);
        set_isa(isa);
        for (int64_t split : {int64_t{0}, int64_t{48}, int64_t{64}}) {
          CAPTURE(split);
          std::vector<float> y(static_cast<size_t>(ldy * n_tokens), -777.0f);
          matmul_rows(t, WeightLayout::packed16, packed.data(), w.row_bytes, acts, y.data(), ldy, 0,
                      split);
          matmul_rows(t, WeightLayout::packed16, packed.data(), w.row_bytes, acts, y.data(), ldy,
                      split, rows);
          REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
        }
      }
    }
  }
  set_isa(saved);
}
