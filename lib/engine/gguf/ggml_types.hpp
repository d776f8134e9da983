// ggml tensor types as stored in GGUF files. Numbers and block geometry are
// ggml's, so files from the common converters load unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace epyctune::engine {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,  // activations only (K-quant dot products); never a weight type here
  BF16 = 30,
  MXFP4 = 39,
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;  // "q4_0"
  int64_t block_elems;    // elements per block (1 for float types)
  size_t block_bytes;     // bytes per block
};

// nullopt for a type number this engine does not support.
std::optional<TypeTraits> type_traits(uint32_t raw);
const TypeTraits& traits(GgmlType t);
std::optional<GgmlType> type_from_name(std::string_view name);  // "q4_0", "Q4_K", "f16", ...
// ggml's name for any type number, supported or not ("q5_k"), for error messages.
std::string_view ggml_type_name(uint32_t raw);

// Bytes of a row of n elements; n must be a multiple of block_elems.
inline size_t row_size(GgmlType t, int64_t n) {
  const auto& tr = traits(t);
  return static_cast<size_t>(n / tr.block_elems) * tr.block_bytes;
}

}  // namespace epyctune::engine
