// avx2 kernels for qx_0 weights (not vectorized yet: dispatch falls back
// to the next lower ISA, which gives identical results).
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx2_table_qx_0(MatmulTable&) {}
}  // namespace epyctune::engine::kernels::detail
