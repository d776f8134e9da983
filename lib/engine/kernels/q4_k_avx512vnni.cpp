// AVX-512 VNNI kernel for Q4_K weights in ggml's layout (vpdpbusd).
#include "engine/kernels/q4_k_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512vnni_table_q4_k(MatmulTable& t) {
  t.q4_k = avx512q4k::matmul<true>;
}
}  // namespace epyctune::engine::kernels::detail
