// Scalar reference matmuls: the canonical accumulation order every ISA
// reproduces bit for bit (and the oracle of the kernel tests).
//
// Q4_0 / Q8_0 (blocks of 32): block b's dot product P = sum w * a is an exact
//   integer; with s = fp32(d_w) * d_a the blocks accumulate in order into one
//   sum per row: acc = fma(P, s, acc), y = acc. One chain per row is what
//   lets the SIMD kernels put 16 rows in the lanes of a vector and broadcast
//   the activations, so that 8 tokens fit one pass over the weights.
// Q4_K (super-blocks of 256, sub-blocks of 32): for sub-block j of
//   super-block b, P = sum q * a over the sub-block is exact, and so are
//   ws = fp32(d_w) * sc_j and wm = fp32(dmin_w) * m_j (11-bit mantissa times
//   6 bits); the activations' scale d_a is the super-block's, so the
//   sub-blocks sum in order without it, s = fma(P, ws, s), then
//   s = fma(-sum(a), wm, s), and the super-block goes in once:
//   acc = fma(s, d_a, acc); y = acc. As for Q4_0, one chain per row lets the
//   SIMD kernels put 16 rows in the lanes and broadcast the activations.
// Q6_K: wq_i = q_i * scale(sub-block of i) is an exact int16; lane
//   l = (i % 32) / 2 collects I[l] = sum wq_i * a_i (exact);
//   acc[l] = fma(I[l], fp32(d_w) * d_a, acc[l]); y = reduce16(acc).
// F32 / F16 / BF16: acc[i % 16] = fma(w_i, x_i, acc[i % 16]).
#include <cmath>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels::detail {
namespace {

template <class RowDot>
void for_rows_tokens(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, RowDot dot) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * w_row_bytes;
    for (int t = 0; t < acts.n_tokens; ++t) y[t * ldy + r] = dot(row, acts.row(t));
  }
}

template <bool kQ4>
void matmul_qx_0(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  const int64_t nb = acts.k / 32;
  for_rows_tokens(w, w_row_bytes, acts, y, ldy, r0, r1, [&](const uint8_t* row, const uint8_t* a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      const int L = static_cast<int>(b % 16);
      const uint8_t* rec = a + static_cast<size_t>(b / 16) * kQ8GroupBytes;
      const auto* qa = reinterpret_cast<const int8_t*>(rec);
      const float da = reinterpret_cast<const float*>(rec + kQ8GroupD)[L];
      int wq[32];
      float dw;
      if constexpr (kQ4) {
        const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
        dw = fp16_to_f32(blk->d);
        for (int e = 0; e < 16; ++e) {
          wq[e] = (blk->qs[e] & 0xF) - 8;
          wq[e + 16] = (blk->qs[e] >> 4) - 8;
        }
      } else {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
        dw = fp16_to_f32(blk->d);
        for (int e = 0; e < 32; ++e) wq[e] = blk->qs[e];
      }
      int sum = 0;
      for (int e = 0; e < 32; ++e) sum += wq[e] * qa[q8_group_pos(L, e)];
      acc = std::fma(static_cast<float>(sum), dw * da, acc);
    }
    return acc;
  });
}

void unpack_q6_K(const BlockQ6_K& blk, int wq[256]) {
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = blk.ql + 64 * n;
    const uint8_t* qh = blk.qh + 32 * n;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32,
                        ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32,
                        ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32,
                        ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32};
      for (int g = 0; g < 4; ++g) {
        const int i = 128 * n + 32 * g + l;
        wq[i] = q[g] * blk.scales[i / 16];
      }
    }
  }
}

void matmul_q4_K(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  for_rows_tokens(w, w_row_bytes, acts, y, ldy, r0, r1, [&](const uint8_t* row, const uint8_t* a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nsb; ++b) {
      const uint8_t* rec = a + static_cast<size_t>(b / 2) * kQ4KPairBytes;
      const auto* qa = reinterpret_cast<const int8_t*>(rec);
      const auto& blk = reinterpret_cast<const BlockQ4_K*>(row)[b];
      const float dw = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
      const float da = reinterpret_cast<const float*>(rec + kQ4KPairD)[8 * (b % 2)];
      const auto* isum = reinterpret_cast<const int16_t*>(rec + kQ4KPairIsum) + 8 * (b % 2);
      float sb = 0.0f;
      int msum = 0;  // |msum| <= 8 * 63 * 32 * 127 < 2^24: exact as a float
      for (int j = 0; j < 8; ++j) {
        const int L = static_cast<int>(8 * (b % 2)) + j;
        uint8_t sc, m;
        q4k_scale_min(j, blk.scales, sc, m);
        int p = 0;
        for (int e = 0; e < 32; ++e) {
          const uint8_t byte = blk.qs[32 * (j / 2) + e];
          const int q = (j & 1) ? byte >> 4 : byte & 0xF;
          p += q * qa[q4k_pair_pos(L, e)];
        }
        sb = std::fma(static_cast<float>(p), dw * static_cast<float>(sc), sb);
        msum += m * isum[q4k_isum_slot(j)];
      }
      sb = std::fma(-static_cast<float>(msum), dmin, sb);
      acc = std::fma(sb, da, acc);
    }
    return acc;
  });
}

void matmul_q6_K(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  const int64_t nsb = acts.k / 256;
  for_rows_tokens(w, w_row_bytes, acts, y, ldy, r0, r1, [&](const uint8_t* row, const uint8_t* a) {
    float acc[16] = {};
    for (int64_t b = 0; b < nsb; ++b) {
      const uint8_t* rec = a + static_cast<size_t>(b) * kKBlockBytes;
      const auto* ab = reinterpret_cast<const int16_t*>(rec);
      const float da = *reinterpret_cast<const float*>(rec + kKBlockD);
      const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
      int wq[256];
      unpack_q6_K(blk, wq);
      int lanes[16] = {};
      for (int i = 0; i < 256; ++i) lanes[(i % 32) / 2] += wq[i] * ab[i];
      const float s = fp16_to_f32(blk.d) * da;
      for (int i = 0; i < 16; ++i) acc[i] = std::fma(static_cast<float>(lanes[i]), s, acc[i]);
    }
    return reduce16(acc);
  });
}

template <class Load>
void matmul_float(const uint8_t* w, size_t w_row_bytes, const Acts& acts, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, Load load) {
  const int64_t k = acts.k;
  for_rows_tokens(w, w_row_bytes, acts, y, ldy, r0, r1, [&](const uint8_t* row, const uint8_t* a) {
    const auto* x = reinterpret_cast<const float*>(a);
    float acc[16] = {};
    for (int64_t i = 0; i < k; ++i) acc[i % 16] = std::fma(load(row, i), x[i], acc[i % 16]);
    return reduce16(acc);
  });
}

void matmul_f32(const uint8_t* w, size_t wrb, const Acts& a, float* y, int64_t ldy, int64_t r0,
                int64_t r1) {
  matmul_float(w, wrb, a, y, ldy, r0, r1, [](const uint8_t* row, int64_t i) {
    return reinterpret_cast<const float*>(row)[i];
  });
}
void matmul_f16(const uint8_t* w, size_t wrb, const Acts& a, float* y, int64_t ldy, int64_t r0,
                int64_t r1) {
  matmul_float(w, wrb, a, y, ldy, r0, r1, [](const uint8_t* row, int64_t i) {
    return fp16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  });
}
void matmul_bf16(const uint8_t* w, size_t wrb, const Acts& a, float* y, int64_t ldy, int64_t r0,
                 int64_t r1) {
  matmul_float(w, wrb, a, y, ldy, r0, r1, [](const uint8_t* row, int64_t i) {
    return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  });
}

}  // namespace

void fill_scalar_table(MatmulTable& t) {
  t.f32 = matmul_f32;
  t.f16 = matmul_f16;
  t.bf16 = matmul_bf16;
  t.q4_0 = matmul_qx_0<true>;
  t.q8_0 = matmul_qx_0<false>;
  t.q4_k = matmul_q4_K;
  t.q6_k = matmul_q6_K;
}

}  // namespace epyctune::engine::kernels::detail
