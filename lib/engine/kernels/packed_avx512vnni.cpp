// AVX-512 VNNI kernels on the row-tile driver:
// packed16 panels (Q4_0, Q8_0, Q4_K) and Q6_K's ggml rows.
#include "engine/kernels/packed_formats_avx512.hpp"
#include "engine/kernels/q4_k_avx512_impl.hpp"
#include "engine/kernels/qx_0_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512vnni_table_packed(MatmulTable& t) {
  t.q4_0_p16 = avx512::matmul_packed<true, true>;
  t.q8_0_p16 = avx512::matmul_packed<false, true>;
  t.q4_k_p16 = avx512q4k::matmul_packed<true>;
  t.q6_k = avx512p::matmul_packed<avx512p::Q6KRows<true>>;
}
}  // namespace epyctune::engine::kernels::detail
