// AVX-512 (F/BW/VL, no VNNI) kernels on the row-tile driver:
// packed16 panels (Q4_0, Q8_0, Q4_K) and Q6_K's ggml rows.
#include "engine/kernels/packed_formats_avx512.hpp"
#include "engine/kernels/q4_k_avx512_impl.hpp"
#include "engine/kernels/qx_0_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512_table_packed(MatmulTable& t) {
  t.q4_0_p16 = avx512::matmul_packed<true, false>;
  t.q8_0_p16 = avx512::matmul_packed<false, false>;
  t.q4_k_p16 = avx512q4k::matmul_packed<false>;
  t.q6_k = avx512p::matmul_packed<avx512p::Q6KRows<false>>;
}
}  // namespace epyctune::engine::kernels::detail
