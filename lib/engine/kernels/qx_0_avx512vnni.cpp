// AVX-512 VNNI kernels for Q4_0 and Q8_0 weights (vpdpbusd).
#include "engine/kernels/qx_0_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512vnni_table_qx_0(MatmulTable& t) {
  t.q4_0 = avx512::matmul<true, true>;
  t.q8_0 = avx512::matmul<false, true>;
}
}  // namespace epyctune::engine::kernels::detail
