// AVX-512 VNNI kernels for Q4_K and Q6_K weights (vpdpwssd).
#include "engine/kernels/k_quants_avx512_impl.hpp"
#include "engine/kernels/q4_k_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512vnni_table_k_quants(MatmulTable& t) {
  t.q6_k = avx512k::matmul<true>;
  t.q4_k = avx512q4k::matmul<true>;
}
}  // namespace epyctune::engine::kernels::detail
