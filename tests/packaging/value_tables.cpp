// Prints the value lists the programs accept, from the code's own tables,
// for check_cli_docs.sh to hold the bash completion and the man pages to:
// one line per option, tab-separated
//   PROGRAM  COMMAND  OPTION  VALUES (space-separated)  WHERE
// WHERE is "completion" (bash offers exactly VALUES after OPTION),
// "man" (the program's man page names every value) or both. COMMAND and
// OPTION are "-" for a list that belongs to no option (the architectures).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/ggml_types.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_config.hpp"
#include "engine/runtime/weight_memory.hpp"
#include "engine/synth/mkmodel.hpp"
#include "stack/checklist.hpp"
#include "stack/steps.hpp"

namespace {

namespace eng = epyctune::engine;

template <typename Range>
void row(std::string_view program, std::string_view command, std::string_view option,
         const Range& values, std::string_view where) {
  fmt::print("{}\t{}\t{}\t{}\t{}\n", program, command, option, fmt::join(values, " "), where);
}

// The weight types a model may hold: every type the GGUF reader supports
// but Q8_K, which ggml uses for activations only. kernel-bench --type takes
// these, and the engine's man page must name them all.
std::vector<std::string> weight_types() {
  std::vector<std::string> out;
  for (uint32_t raw = 0; raw < 256; ++raw)
    if (auto t = eng::type_traits(raw); t && t->type != eng::GgmlType::Q8_K)
      out.emplace_back(t->name);
  return out;
}

std::vector<std::string> architectures() {
  std::vector<std::string> out;
  const std::string all = eng::supported_arch_names();  // "llama, qwen2, ..."
  for (size_t i = 0; i < all.size();) {
    size_t comma = all.find(", ", i);
    out.push_back(all.substr(i, comma - i));
    i = comma == std::string::npos ? all.size() : comma + 2;
  }
  return out;
}

}  // namespace

int main() {
  using eng::kernels::Isa;
  std::vector<std::string> steps;
  for (const auto& s : epyctune::stack::all_steps()) steps.push_back(s.name);
  for (const char* cmd : {"plan", "apply", "verify"})
    row("epyctune", cmd, "--steps", steps, "completion");
  row("epyctune", "verify", "--format", epyctune::stack::checklist_format_names(), "completion");

  std::vector<std::string> isas;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512vnni})
    isas.emplace_back(eng::kernels::isa_name(i));
  row("epyctune-engine", "kernel-bench", "--type", weight_types(), "completion,man");
  row("epyctune-engine", "kernel-bench", "--isa", isas, "completion");
  row("epyctune-engine", "bench", "--isa", isas, "completion");
  // kernels::WeightLayout { ggml, packed16 } has no name function.
  row("epyctune-engine", "kernel-bench", "--layout", std::vector<std::string>{"ggml", "packed16"},
      "completion");
  std::vector<std::string> numa;
  for (auto p : {eng::runtime::NumaPolicy::none, eng::runtime::NumaPolicy::interleave,
                 eng::runtime::NumaPolicy::split, eng::runtime::NumaPolicy::local})
    numa.emplace_back(eng::runtime::numa_policy_name(p));
  row("epyctune-engine", "bench", "--numa", numa, "completion");
  // The KV cache types LlamaModel accepts (llama_model.cpp).
  row("epyctune-engine", "bench", "--kv", std::vector<std::string>{"f16", "f32"}, "completion");
  row("epyctune-engine", "-", "-", architectures(), "man");

  row("epyctune-mkmodel", "mkmodel", "--shape", eng::shape_presets(), "completion");
  row("epyctune-mkmodel", "mkmodel", "--quant", eng::quant_names(), "completion");
  row("epyctune-mkmodel", "mkmodel", "--arch", architectures(), "completion");
  return 0;
}
