// Tiny generated models for the model tests.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

namespace epyctune::testing {

inline std::filesystem::path make_model(const TempDir& dir, const std::string& shape,
                                        const std::string& quant, uint64_t seed = 7) {
  auto path = dir.path() / (quant + "-" + std::to_string(seed) + "-" +
                            std::to_string(std::hash<std::string>{}(shape)) + ".gguf");
  if (!std::filesystem::exists(path)) {
    engine::WriteOptions o;
    o.quant = quant;
    o.seed = seed;
    o.threads = 2;
    engine::write_model(path, engine::parse_shape(shape), o);
  }
  return path;
}

inline bool bit_equal(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

inline int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace epyctune::testing
