// AVX-512 (F/BW/VL, no VNNI) kernel for Q4_K weights in ggml's layout.
#include "engine/kernels/q4_k_avx512_impl.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512_table_q4_k(MatmulTable& t) {
  t.q4_k = avx512q4k::matmul<false>;
}
}  // namespace epyctune::engine::kernels::detail
