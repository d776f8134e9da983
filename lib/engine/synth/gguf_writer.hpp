// GGUF v3 writer: for mkmodel, the vocab writer and the tests. Not linked by
// the engine's load path.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.hpp"

namespace epyctune::engine::gguf {

// Streams a GGUF v3 file: metadata first, then tensor infos, then data, each
// tensor aligned; tensors are written as added so 7B models never sit in RAM twice.
class Writer {
 public:
  Writer();
  void set(std::string key, Value v);
  void set_u32(std::string key, uint32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_i32(std::string key, int32_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_i32_array(std::string key, std::vector<int32_t> v);
  // Declare every tensor (name, type, dims; ne[0] first as ggml) before begin().
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne);
  // Writes header + infos to PATH.partial; finish() renames it to PATH, and a
  // Writer destroyed before finish() removes it.
  void begin(const std::filesystem::path& path);
  void write_tensor_data(std::string_view name,
                         std::span<const uint8_t> data);  // in declared order
  void finish();                                          // fsync + close

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;

 public:
  ~Writer();
};

}  // namespace epyctune::engine::gguf
