// Q5_0, Q5_1, Q5_K and MXFP4 matmuls by exact rewrite into the Q8_0 / Q4_K
// kernels (convert_matmul.cpp has the rules).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels::detail {

bool is_converted_type(GgmlType t);
// The active ISA's ggml-layout kernels the rewrites run on.
struct ConvertKernels {
  MatmulFn q8_0, q4_k;
};
void matmul_converted(GgmlType wtype, const ConvertKernels& kern, const uint8_t* w,
                      size_t row_bytes, const Acts& acts, float* y, int64_t ldy, int64_t r0,
                      int64_t r1);

}  // namespace epyctune::engine::kernels::detail
