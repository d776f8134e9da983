#include "engine/gguf/ggml_types.hpp"

#include <array>
#include <cctype>
#include <stdexcept>
#include <string>

namespace epyctune::engine {
namespace {

// Block geometry from ggml (ggml-common.h): a Q4_0 block is an f16 scale plus
// 32 nibbles, a Q4_K super-block covers 256 values in 144 bytes, and so on.
constexpr std::array<TypeTraits, 12> kTraits{{
    {GgmlType::F32, "f32", 1, 4},
    {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", 32, 18},
    {GgmlType::Q8_0, "q8_0", 32, 34},
    {GgmlType::Q4_K, "q4_k", 256, 144},
    {GgmlType::Q6_K, "q6_k", 256, 210},
    {GgmlType::Q5_0, "q5_0", 32, 22},
    {GgmlType::Q5_1, "q5_1", 32, 24},
    {GgmlType::Q5_K, "q5_k", 256, 176},
    {GgmlType::MXFP4, "mxfp4", 32, 17},
    {GgmlType::Q8_K, "q8_k", 256, 292},
    {GgmlType::BF16, "bf16", 1, 2},
}};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t raw) {
  for (const auto& t : kTraits)
    if (static_cast<uint32_t>(t.type) == raw) return t;
  return std::nullopt;
}

const TypeTraits& traits(GgmlType t) {
  for (const auto& tr : kTraits)
    if (tr.type == t) return tr;
  throw std::invalid_argument("ggml type " + std::to_string(static_cast<uint32_t>(t)) +
                              " has no traits");
}

std::optional<GgmlType> type_from_name(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& t : kTraits)
    if (t.name == lower) return t.type;
  return std::nullopt;
}

std::string_view ggml_type_name(uint32_t raw) {
  // ggml's full numbering (ggml.h), including types this engine cannot run,
  // so an error can say "q5_k (13)" rather than a bare number.
  static constexpr std::array<std::string_view, 40> kNames{"f32",
                                                           "f16",
                                                           "q4_0",
                                                           "q4_1",
                                                           "q4_2 (removed)",
                                                           "q4_3 (removed)",
                                                           "q5_0",
                                                           "q5_1",
                                                           "q8_0",
                                                           "q8_1",
                                                           "q2_k",
                                                           "q3_k",
                                                           "q4_k",
                                                           "q5_k",
                                                           "q6_k",
                                                           "q8_k",
                                                           "iq2_xxs",
                                                           "iq2_xs",
                                                           "iq3_xxs",
                                                           "iq1_s",
                                                           "iq4_nl",
                                                           "iq3_s",
                                                           "iq2_s",
                                                           "iq4_xs",
                                                           "i8",
                                                           "i16",
                                                           "i32",
                                                           "i64",
                                                           "f64",
                                                           "iq1_m",
                                                           "bf16",
                                                           "q4_0_4_4 (removed)",
                                                           "q4_0_4_8 (removed)",
                                                           "q4_0_8_8 (removed)",
                                                           "tq1_0",
                                                           "tq2_0",
                                                           "iq4_nl_4_4 (removed)",
                                                           "iq4_nl_4_8 (removed)",
                                                           "iq4_nl_8_8 (removed)",
                                                           "mxfp4"};
  return raw < kNames.size() ? kNames[raw] : std::string_view("unknown");
}

}  // namespace epyctune::engine
