// AVX-512 (F/BW/VL, no VNNI) kernels for Q4_K and Q6_K weights.
#include "engine/kernels/k_quants_avx512_impl.hpp"
#include "engine/kernels/q4_k_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512_table_k_quants(MatmulTable& t) {
  t.q6_k = avx512k::matmul<false>;
  t.q4_k = avx512q4k::matmul<false>;
}
}  // namespace epyctune::engine::kernels::detail
