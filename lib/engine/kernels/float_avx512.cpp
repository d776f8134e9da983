// avx512 kernels for float weights (not vectorized yet: dispatch falls back
// to the next lower ISA, which gives identical results).
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels::detail {
void fill_avx512_table_float(MatmulTable&) {}
}  // namespace epyctune::engine::kernels::detail
