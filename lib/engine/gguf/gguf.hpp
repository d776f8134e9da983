// GGUF v3 reader (mmap, every field validated). The writer is in engine/synth/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "engine/gguf/ggml_types.hpp"

namespace epyctune::engine::gguf {

// A malformed file. what() names the file, the byte offset and the field
// ("tensor 'blk.3.attn_q.weight': data offset 0x... past end of file").
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "u32", "string", ... for messages.
std::string_view value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType elem_type = ValueType::U8;
  std::vector<Value> items;  // strings/ints/floats of one type
};
// v holds uint64_t for U8/U16/U32/U64, int64_t for I8..I64, double for
// F32/F64, bool, std::string, or the array; type keeps the on-disk width.
struct Value {
  ValueType type = ValueType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};   // ne[0] = row length (contiguous), as ggml
  uint64_t offset = 0;            // relative to the data section
  const uint8_t* data = nullptr;  // into the mapping
  size_t nbytes = 0;
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // mmaps and validates the whole file. std::runtime_error when it cannot be
  // opened or mapped; FormatError (file, byte offset, field) when malformed.
  static std::unique_ptr<File> open(const std::filesystem::path& path);
  // Parses a buffer the caller keeps alive (fuzzing, tests).
  static std::unique_ptr<File> parse(std::span<const uint8_t> bytes, std::string name = "<memory>");
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  // Typed getters: nullopt when absent; FormatError when present with another type.
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  const Array* get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(std::string_view name) const;
  std::span<const uint8_t> bytes() const { return {base_, size_}; }
  // Absolute file offset where the (aligned) tensor data section starts.
  size_t data_offset() const { return data_offset_; }

 private:
  File() = default;
  static void parse_into(File& f, std::span<const uint8_t> bytes);
  size_t data_offset_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // munmap'd in the destructor when owned
  size_t map_len_ = 0;
};

}  // namespace epyctune::engine::gguf
