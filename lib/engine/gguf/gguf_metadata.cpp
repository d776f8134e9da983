// Typed metadata access: a key that is present with the wrong type is a
// format error naming the key and both types, never a silent default.
#include <fmt/format.h>

#include <limits>

#include "engine/gguf/gguf.hpp"

namespace epyctune::engine::gguf {
namespace {

std::string_view type_name(ValueType t) {
  switch (t) {
    case ValueType::U8:
      return "u8";
    case ValueType::I8:
      return "i8";
    case ValueType::U16:
      return "u16";
    case ValueType::I16:
      return "i16";
    case ValueType::U32:
      return "u32";
    case ValueType::I32:
      return "i32";
    case ValueType::F32:
      return "f32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::U64:
      return "u64";
    case ValueType::I64:
      return "i64";
    case ValueType::F64:
      return "f64";
  }
  return "?";
}

[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const Value& v,
                             std::string_view wanted) {
  throw FormatError(fmt::format("{}: metadata '{}': expected {}, found {}", file, key, wanted,
                                type_name(v.type)));
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  return type_name(t);
}

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

// Converters disagree on signedness for counts (some write i32 for u32
// fields), so integer getters accept any integer type whose value fits.
std::optional<uint64_t> File::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) {
    if (const auto* u = std::get_if<uint64_t>(&v->v)) return *u;
    if (const auto* i = std::get_if<int64_t>(&v->v)) {
      if (*i < 0)
        throw FormatError(fmt::format(
            "{}: metadata '{}': expected a non-negative integer, found {}", path_, key, *i));
      return static_cast<uint64_t>(*i);
    }
  }
  wrong_type(path_, key, *v, "an unsigned integer");
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) {
    if (const auto* i = std::get_if<int64_t>(&v->v)) return *i;
    if (const auto* u = std::get_if<uint64_t>(&v->v)) {
      if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw FormatError(
            fmt::format("{}: metadata '{}': {} does not fit in a signed 64-bit "
                        "integer",
                        path_, key, *u));
      return static_cast<int64_t>(*u);
    }
  }
  wrong_type(path_, key, *v, "an integer");
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* d = std::get_if<double>(&v->v)) return *d;
  wrong_type(path_, key, *v, "a float (f32/f64)");
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* b = std::get_if<bool>(&v->v)) return *b;
  wrong_type(path_, key, *v, "a bool");
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&v->v)) return *s;
  wrong_type(path_, key, *v, "a string");
}

const Array* File::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  if (const auto* a = std::get_if<std::shared_ptr<Array>>(&v->v)) return a->get();
  wrong_type(path_, key, *v, "an array");
}

const TensorInfo* File::tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace epyctune::engine::gguf
