// AVX-512 (F/BW/VL, no VNNI) kernels for Q4_0 and Q8_0 weights.
#include "engine/kernels/qx_0_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512_table_qx_0(MatmulTable& t) {
  t.q4_0 = avx512::matmul<true, false>;
  t.q8_0 = avx512::matmul<false, false>;
}
}  // namespace epyctune::engine::kernels::detail
