// GGUF v3 writer, following ggml's docs/gguf.md: little-endian fields,
// strings as u64 length + bytes, metadata, then tensor infos, then the data
// section aligned to general.alignment (default 32) with each tensor's offset
// relative to that section and itself aligned. Tensor data is streamed in the
// declared order, so a 7B model is never held in memory twice.
#include "engine/synth/gguf_writer.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace epyctune::engine::gguf {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// Built step by step rather than as an aggregate: GCC's -Wmaybe-uninitialized
// misfires on brace-initialised variants under -fsanitize=address.
template <typename T>
Value make_value(ValueType t, T&& x) {
  Value v;
  v.type = t;
  v.v.emplace<std::decay_t<T>>(std::forward<T>(x));
  return v;
}

}  // namespace

struct Writer::Impl {
  struct Decl {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t offset = 0;
    uint64_t nbytes = 0;
  };
  std::vector<std::pair<std::string, Value>> kv;
  std::vector<Decl> tensors;
  std::unordered_set<std::string> tensor_names;
  std::string path;      // final name
  std::string tmp_path;  // written here, renamed to path by finish()
  int fd = -1;
  uint64_t written = 0;  // bytes in the file so far
  size_t next = 0;       // index of the next tensor whose data is expected
  uint64_t alignment = 32;
  std::vector<uint8_t> buf;  // small fields are batched before hitting write(2)

  void flush() {
    size_t done = 0;
    while (done < buf.size()) {
      const ssize_t n = ::write(fd, buf.data() + done, buf.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    buf.clear();
  }
  void put(const void* p, size_t n) {
    if (buf.size() + n > (1u << 20)) flush();
    if (n >= (1u << 20)) {
      // Large tensor payloads go straight to the kernel, not through buf.
      const auto* b = static_cast<const uint8_t*>(p);
      size_t done = 0;
      while (done < n) {
        const ssize_t w = ::write(fd, b + done, n - done);
        if (w < 0) {
          if (errno == EINTR) continue;
          throw std::runtime_error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
        }
        done += static_cast<size_t>(w);
      }
    } else {
      const auto* b = static_cast<const uint8_t*>(p);
      buf.insert(buf.end(), b, b + n);
    }
    written += n;
  }
  template <typename T>
  void put(T v) {
    put(&v, sizeof v);
  }
  void put_string(std::string_view s) {
    put(static_cast<uint64_t>(s.size()));
    put(s.data(), s.size());
  }
  void pad() {
    static const uint8_t zeros[64] = {};
    uint64_t n = align_up(written, alignment) - written;
    while (n > 0) {
      const uint64_t k = std::min<uint64_t>(n, sizeof zeros);
      put(zeros, static_cast<size_t>(k));
      n -= k;
    }
  }
  void put_value(const Value& v, const std::string& key) {
    auto bad = [&] {
      throw std::invalid_argument(
          fmt::format("gguf writer: metadata '{}': value does not hold its declared type {}", key,
                      static_cast<uint32_t>(v.type)));
    };
    auto uint = [&]() -> uint64_t {
      const auto* u = std::get_if<uint64_t>(&v.v);
      if (!u) bad();
      return *u;
    };
    auto sint = [&]() -> int64_t {
      const auto* i = std::get_if<int64_t>(&v.v);
      if (!i) bad();
      return *i;
    };
    auto flt = [&]() -> double {
      const auto* d = std::get_if<double>(&v.v);
      if (!d) bad();
      return *d;
    };
    switch (v.type) {
      case ValueType::U8:
        put(static_cast<uint8_t>(uint()));
        break;
      case ValueType::U16:
        put(static_cast<uint16_t>(uint()));
        break;
      case ValueType::U32:
        put(static_cast<uint32_t>(uint()));
        break;
      case ValueType::U64:
        put(uint());
        break;
      case ValueType::I8:
        put(static_cast<int8_t>(sint()));
        break;
      case ValueType::I16:
        put(static_cast<int16_t>(sint()));
        break;
      case ValueType::I32:
        put(static_cast<int32_t>(sint()));
        break;
      case ValueType::I64:
        put(sint());
        break;
      case ValueType::F32:
        put(static_cast<float>(flt()));
        break;
      case ValueType::F64:
        put(flt());
        break;
      case ValueType::BOOL: {
        const auto* b = std::get_if<bool>(&v.v);
        if (!b) bad();
        put(static_cast<uint8_t>(*b ? 1 : 0));
        break;
      }
      case ValueType::STRING: {
        const auto* s = std::get_if<std::string>(&v.v);
        if (!s) bad();
        put_string(*s);
        break;
      }
      case ValueType::ARRAY: {
        const auto* a = std::get_if<std::shared_ptr<Array>>(&v.v);
        if (!a || !*a) bad();
        put(static_cast<uint32_t>((*a)->elem_type));
        put(static_cast<uint64_t>((*a)->items.size()));
        for (const auto& item : (*a)->items) {
          if (item.type != (*a)->elem_type)
            throw std::invalid_argument(fmt::format(
                "gguf writer: metadata '{}': array item type differs from element type", key));
          put_value(item, key);
        }
        break;
      }
    }
  }
};

Writer::Writer() : impl_(std::make_unique<Impl>()) {}

Writer::~Writer() {
  // Not finished (an exception, an early return): drop the partial file so a
  // half-written model never sits where a good one is expected.
  if (impl_ && impl_->fd >= 0) {
    ::close(impl_->fd);
    ::unlink(impl_->tmp_path.c_str());
  }
}

void Writer::set(std::string key, Value v) {
  if (impl_->fd >= 0) throw std::logic_error("gguf writer: set() after begin()");
  for (auto& [k, old] : impl_->kv)
    if (k == key) {
      old = std::move(v);
      return;
    }
  impl_->kv.emplace_back(std::move(key), std::move(v));
}

void Writer::set_u32(std::string key, uint32_t v) {
  set(std::move(key), make_value(ValueType::U32, uint64_t{v}));
}
void Writer::set_u64(std::string key, uint64_t v) {
  set(std::move(key), make_value(ValueType::U64, v));
}
void Writer::set_i32(std::string key, int32_t v) {
  set(std::move(key), make_value(ValueType::I32, int64_t{v}));
}
void Writer::set_f32(std::string key, float v) {
  set(std::move(key), make_value(ValueType::F32, double{v}));
}
void Writer::set_bool(std::string key, bool v) {
  set(std::move(key), make_value(ValueType::BOOL, v));
}
void Writer::set_string(std::string key, std::string v) {
  set(std::move(key), make_value(ValueType::STRING, std::move(v)));
}

void Writer::set_string_array(std::string key, std::vector<std::string> v) {
  auto a = std::make_shared<Array>();
  a->elem_type = ValueType::STRING;
  a->items.reserve(v.size());
  for (auto& s : v) a->items.push_back(make_value(ValueType::STRING, std::move(s)));
  set(std::move(key), make_value(ValueType::ARRAY, std::move(a)));
}

void Writer::set_f32_array(std::string key, std::vector<float> v) {
  auto a = std::make_shared<Array>();
  a->elem_type = ValueType::F32;
  a->items.reserve(v.size());
  for (float f : v) a->items.push_back(make_value(ValueType::F32, double{f}));
  set(std::move(key), make_value(ValueType::ARRAY, std::move(a)));
}

void Writer::set_i32_array(std::string key, std::vector<int32_t> v) {
  auto a = std::make_shared<Array>();
  a->elem_type = ValueType::I32;
  a->items.reserve(v.size());
  for (int32_t i : v) a->items.push_back(make_value(ValueType::I32, int64_t{i}));
  set(std::move(key), make_value(ValueType::ARRAY, std::move(a)));
}

void Writer::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne) {
  if (impl_->fd >= 0) throw std::logic_error("gguf writer: add_tensor() after begin()");
  if (name.empty() || name.size() > 64)
    throw std::invalid_argument(
        fmt::format("gguf writer: tensor name '{}' must be 1..64 bytes", name));
  if (ne.empty() || ne.size() > 4)
    throw std::invalid_argument(fmt::format("gguf writer: tensor '{}': 1..4 dimensions", name));
  const auto& tr = traits(type);
  uint64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0)
      throw std::invalid_argument(fmt::format("gguf writer: tensor '{}': dim <= 0", name));
    n *= static_cast<uint64_t>(d);
  }
  if (ne[0] % tr.block_elems != 0)
    throw std::invalid_argument(
        fmt::format("gguf writer: tensor '{}': ne[0]={} not a multiple of "
                    "the {} block size {}",
                    name, ne[0], tr.name, tr.block_elems));
  if (!impl_->tensor_names.insert(name).second)
    throw std::invalid_argument(fmt::format("gguf writer: duplicate tensor '{}'", name));
  Impl::Decl d{std::move(name), type, std::move(ne), 0,
               n / static_cast<uint64_t>(tr.block_elems) * tr.block_bytes};
  impl_->tensors.push_back(std::move(d));
}

void Writer::begin(const std::filesystem::path& path) {
  auto& m = *impl_;
  if (m.fd >= 0) throw std::logic_error("gguf writer: begin() called twice");
  for (const auto& [k, v] : m.kv)
    if (k == "general.alignment") {
      const auto* u = std::get_if<uint64_t>(&v.v);
      if (v.type != ValueType::U32 || !u || *u == 0 || (*u & (*u - 1)) != 0)
        throw std::invalid_argument("gguf writer: general.alignment must be a u32 power of two");
      m.alignment = *u;
    }
  uint64_t off = 0;
  for (auto& t : m.tensors) {
    t.offset = off;
    off = align_up(off + t.nbytes, m.alignment);
  }
  m.path = path.string();
  m.tmp_path = m.path + ".partial";
  m.fd = ::open(m.tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (m.fd < 0)
    throw std::runtime_error(
        fmt::format("{}: cannot create: {}", m.tmp_path, std::strerror(errno)));
  m.put("GGUF", 4);
  m.put(uint32_t{3});
  m.put(static_cast<uint64_t>(m.tensors.size()));
  m.put(static_cast<uint64_t>(m.kv.size()));
  for (const auto& [k, v] : m.kv) {
    m.put_string(k);
    m.put(static_cast<uint32_t>(v.type));
    m.put_value(v, k);
  }
  for (const auto& t : m.tensors) {
    m.put_string(t.name);
    m.put(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) m.put(static_cast<uint64_t>(d));
    m.put(static_cast<uint32_t>(t.type));
    m.put(t.offset);
  }
  // gguf-py leaves a tensor-less (vocabulary-only) file unpadded; so do we.
  if (!m.tensors.empty()) m.pad();
}

void Writer::write_tensor_data(std::string_view name, std::span<const uint8_t> data) {
  auto& m = *impl_;
  if (m.fd < 0) throw std::logic_error("gguf writer: write_tensor_data() before begin()");
  if (m.next >= m.tensors.size())
    throw std::logic_error(
        fmt::format("gguf writer: tensor '{}': all tensors already written", name));
  const auto& t = m.tensors[m.next];
  if (t.name != name)
    throw std::logic_error(
        fmt::format("gguf writer: got data for '{}' but '{}' is next in "
                    "declared order",
                    name, t.name));
  if (data.size() != t.nbytes)
    throw std::invalid_argument(fmt::format("gguf writer: tensor '{}': {} bytes given, {} expected",
                                            name, data.size(), t.nbytes));
  m.put(data.data(), data.size());
  m.pad();
  ++m.next;
}

void Writer::finish() {
  auto& m = *impl_;
  if (m.fd < 0) throw std::logic_error("gguf writer: finish() before begin()");
  if (m.next != m.tensors.size())
    throw std::logic_error(
        fmt::format("gguf writer: finish() with tensor '{}' not written", m.tensors[m.next].name));
  m.flush();
  if (::fsync(m.fd) != 0)
    throw std::runtime_error(fmt::format("{}: fsync failed: {}", m.path, std::strerror(errno)));
  if (::close(m.fd) != 0) {
    m.fd = -1;
    throw std::runtime_error(fmt::format("{}: close failed: {}", m.path, std::strerror(errno)));
  }
  m.fd = -1;
  if (::rename(m.tmp_path.c_str(), m.path.c_str()) != 0) {
    const int e = errno;
    ::unlink(m.tmp_path.c_str());
    throw std::runtime_error(
        fmt::format("{}: cannot rename {} into place: {}", m.path, m.tmp_path, std::strerror(e)));
  }
}

}  // namespace epyctune::engine::gguf
