// GGUF reader. The file is untrusted: every count is bounded by the bytes
// that remain before anything is allocated, every offset is checked before it
// is dereferenced, and every failure names the file, the byte offset and the
// field, so a truncated download or a hostile file is an error, never a crash.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "engine/gguf/gguf.hpp"
#include "engine/gguf/gguf_detail.hpp"

namespace epyctune::engine::gguf {
namespace {

constexpr int kMaxArrayDepth = 4;  // the spec allows nesting; nothing real goes deeper than 1
constexpr size_t kMaxKeyLen = 65535;
constexpr size_t kMaxTensorNameLen = 64;  // GGUF spec: tensor names are at most 64 bytes

// Reads little-endian fields from the untrusted buffer; every read is bounds checked.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> b, const std::string& file) : b_(b), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return b_.size() - pos_; }

  [[noreturn]] void fail(size_t at, std::string_view what, std::string_view msg) const {
    throw FormatError(fmt::format("{}: at byte {}: {}: {}", file_, at, what, msg));
  }

  void need(size_t n, std::string_view what) const {
    if (n > remaining())
      fail(pos_, what,
           fmt::format("needs {} bytes but the file ends after {} (file size {}); truncated file?",
                       n, remaining(), b_.size()));
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));  // host is little endian (x86-64)
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    const size_t at = pos_;
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      fail(at, what,
           fmt::format("string length {} exceeds the {} bytes left in the file", len, remaining()));
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  // Rejects a count that could not possibly fit, before anything is reserved.
  void check_count(uint64_t count, size_t min_item_bytes, size_t at, std::string_view what) const {
    if (min_item_bytes > 0 && count > remaining() / min_item_bytes)
      fail(at, what,
           fmt::format("count {} cannot fit in the {} bytes left (each item takes at least {})",
                       count, remaining(), min_item_bytes));
  }

 private:
  std::span<const uint8_t> b_;
  const std::string& file_;
  size_t pos_ = 0;
};

size_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
      return 8;  // u64 length
    case ValueType::ARRAY:
      return 12;  // u32 type + u64 count
  }
  return 1;
}

bool valid_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::F64);
}

Value read_value(Cursor& c, ValueType type, const std::string& what, int depth) {
  Value v;
  v.type = type;
  switch (type) {
    case ValueType::U8:
      v.v = uint64_t{c.read<uint8_t>(what)};
      break;
    case ValueType::U16:
      v.v = uint64_t{c.read<uint16_t>(what)};
      break;
    case ValueType::U32:
      v.v = uint64_t{c.read<uint32_t>(what)};
      break;
    case ValueType::U64:
      v.v = c.read<uint64_t>(what);
      break;
    case ValueType::I8:
      v.v = int64_t{c.read<int8_t>(what)};
      break;
    case ValueType::I16:
      v.v = int64_t{c.read<int16_t>(what)};
      break;
    case ValueType::I32:
      v.v = int64_t{c.read<int32_t>(what)};
      break;
    case ValueType::I64:
      v.v = c.read<int64_t>(what);
      break;
    case ValueType::F32:
      v.v = double{c.read<float>(what)};
      break;
    case ValueType::F64:
      v.v = c.read<double>(what);
      break;
    case ValueType::BOOL: {
      const size_t at = c.pos();
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(at, what, fmt::format("bool value is {}, must be 0 or 1", b));
      v.v = b == 1;
      break;
    }
    case ValueType::STRING:
      v.v = c.read_string(what);
      break;
    case ValueType::ARRAY: {
      const size_t at = c.pos();
      if (depth >= kMaxArrayDepth)
        c.fail(at, what, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
      const uint32_t et = c.read<uint32_t>(what + " (array element type)");
      if (!valid_value_type(et))
        c.fail(at, what, fmt::format("array element type {} is not a GGUF value type (0..12)", et));
      const size_t count_at = c.pos();
      const uint64_t n = c.read<uint64_t>(what + " (array length)");
      auto arr = std::make_shared<Array>();
      arr->elem_type = static_cast<ValueType>(et);
      c.check_count(n, min_value_bytes(arr->elem_type), count_at, what + " (array length)");
      arr->items.reserve(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i)
        arr->items.push_back(read_value(c, arr->elem_type, what, depth + 1));
      v.v = std::move(arr);
      break;
    }
  }
  return v;
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// The fixed part before the metadata: magic, version and the two counts.
struct Header {
  uint32_t version = 0;
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
};

Header read_header(Cursor& c, std::span<const uint8_t> bytes) {
  const uint32_t magic = c.read<uint32_t>("magic");
  if (std::memcmp(bytes.data(), "GGUF", 4) != 0)
    c.fail(0, "magic",
           fmt::format("expected 'GGUF', found 0x{:08x}; not a GGUF file (GGML/GGJT files must be "
                       "converted with a current llama.cpp converter)",
                       magic));
  const uint32_t version = c.read<uint32_t>("version");
  if (version == 1)
    c.fail(4, "version",
           "GGUF version 1 is not supported (32-bit counts); re-convert the model with a current "
           "converter to get version 3");
  if (version != 2 && version != 3) {
    if ((version & 0xffff) == 0 && (version >> 16) != 0)
      c.fail(4, "version",
             fmt::format("version reads 0x{:08x}: a big-endian GGUF file, which this "
                         "little-endian host cannot use",
                         version));
    c.fail(4, "version",
           fmt::format("unsupported GGUF version {} (this reader knows 2 and 3)", version));
  }
  Header h;
  h.version = version;
  h.n_tensors = c.read<uint64_t>("tensor count");
  h.n_kv = c.read<uint64_t>("metadata key/value count");
  // A key/value pair takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes.
  c.check_count(h.n_kv, 14, 16, "metadata key/value count");
  // A tensor info takes at least 8 + 1 (name) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset).
  c.check_count(h.n_tensors, 33, 8, "tensor count");
  return h;
}

// Reads the n_kv key/value pairs into kv; returns the byte offset of the
// general.alignment pair (0 when absent), for its error message.
size_t read_metadata(Cursor& c, uint64_t n_kv, std::vector<std::pair<std::string, Value>>& kv) {
  std::unordered_set<std::string_view> keys;
  kv.reserve(static_cast<size_t>(n_kv));
  size_t alignment_at = 0;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = c.pos();
    const std::string what = fmt::format("metadata key #{}", i);
    std::string key = c.read_string(what);
    if (key.empty()) c.fail(at, what, "empty key");
    if (key.size() > kMaxKeyLen)
      c.fail(at, what, fmt::format("key is {} bytes long (at most {})", key.size(), kMaxKeyLen));
    const std::string kwhat = fmt::format("metadata '{}'", printable(key));
    const size_t type_at = c.pos();
    const uint32_t t = c.read<uint32_t>(kwhat + " (value type)");
    if (!valid_value_type(t))
      c.fail(type_at, kwhat, fmt::format("value type {} is not a GGUF value type (0..12)", t));
    Value v = read_value(c, static_cast<ValueType>(t), kwhat, 0);
    if (key == "general.alignment") alignment_at = at;
    kv.emplace_back(std::move(key), std::move(v));
    // string_view into the vector's strings is unsafe across reallocation, so
    // the capacity was reserved above and never grows.
    if (!keys.insert(kv.back().first).second) c.fail(at, kwhat, "duplicate key");
  }
  return alignment_at;
}

// general.alignment's value, once checked to be a usable alignment.
size_t alignment_of(const Cursor& c, const Value& a, size_t alignment_at) {
  const auto* u = std::get_if<uint64_t>(&a.v);
  if (!u || a.type == ValueType::BOOL)
    c.fail(alignment_at, "metadata 'general.alignment'",
           fmt::format("must be an unsigned integer (u32), found {}", value_type_name(a.type)));
  if (*u == 0 || (*u & (*u - 1)) != 0 || *u > (1u << 30))
    c.fail(alignment_at, "metadata 'general.alignment'",
           fmt::format("{} is not a power of two between 1 and 2^30", *u));
  return static_cast<size_t>(*u);
}

// The i-th tensor info, checked on its own: name, shape, a supported type
// whose blocks divide the rows, a size that fits 64 bits, an aligned offset.
TensorInfo read_tensor_info(Cursor& c, uint64_t i, size_t alignment) {
  const size_t at = c.pos();
  TensorInfo ti;
  ti.name = c.read_string(fmt::format("tensor #{} name", i));
  const std::string what = fmt::format("tensor '{}' (#{})", printable(ti.name), i);
  if (ti.name.empty()) c.fail(at, what, "empty tensor name");
  if (ti.name.size() > kMaxTensorNameLen)
    c.fail(at, what,
           fmt::format("name is {} bytes long (at most {})", ti.name.size(), kMaxTensorNameLen));
  const size_t dims_at = c.pos();
  const uint32_t n_dims = c.read<uint32_t>(what + " n_dims");
  if (n_dims < 1 || n_dims > 4)
    c.fail(dims_at, what, fmt::format("n_dims is {}, must be 1..4", n_dims));
  ti.n_dims = static_cast<int>(n_dims);
  int64_t n_el = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const size_t dat = c.pos();
    const uint64_t ne = c.read<uint64_t>(what + " dimension");
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      c.fail(dat, what, fmt::format("dimension {} is {}, must be > 0", d, ne));
    ti.ne[d] = static_cast<int64_t>(ne);
    if (n_el > std::numeric_limits<int64_t>::max() / ti.ne[d])
      c.fail(dat, what, "element count overflows 64 bits");
    n_el *= ti.ne[d];
  }
  const size_t type_at = c.pos();
  const uint32_t raw_type = c.read<uint32_t>(what + " type");
  const auto tr = type_traits(raw_type);
  if (!tr || tr->type == GgmlType::Q8_K)
    c.fail(type_at, what,
           fmt::format("type {} ({}) is not supported (supported: f32, f16, bf16, q8_0, q4_0, "
                       "q4_k, q6_k); requantize the model to one of those",
                       ggml_type_name(raw_type), raw_type));
  ti.type = tr->type;
  if (ti.ne[0] % tr->block_elems != 0)
    c.fail(dims_at, what,
           fmt::format("row length ne[0]={} is not a multiple of the {} block size {}", ti.ne[0],
                       tr->name, tr->block_elems));
  const uint64_t blocks = static_cast<uint64_t>(n_el / tr->block_elems);
  if (blocks > std::numeric_limits<uint64_t>::max() / tr->block_bytes)
    c.fail(dims_at, what, "data size overflows 64 bits");
  ti.nbytes = static_cast<size_t>(blocks * tr->block_bytes);
  const size_t off_at = c.pos();
  ti.offset = c.read<uint64_t>(what + " data offset");
  if (ti.offset % alignment != 0)
    c.fail(
        off_at, what,
        fmt::format("data offset {} is not a multiple of the alignment {}", ti.offset, alignment));
  return ti;
}

// Reads the n_tensors tensor infos into tensors, names unique; returns where
// each one starts, for the errors found later about its data.
std::vector<size_t> read_tensor_infos(Cursor& c, uint64_t n_tensors, size_t alignment,
                                      std::vector<TensorInfo>& tensors) {
  std::unordered_set<std::string_view> names;
  std::vector<size_t> info_at(static_cast<size_t>(n_tensors));
  // Reserved for the same reason as the metadata: names views its strings.
  tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = c.pos();
    info_at[i] = at;
    tensors.push_back(read_tensor_info(c, i, alignment));
    if (!names.insert(tensors.back().name).second)
      c.fail(at, fmt::format("tensor '{}' (#{})", printable(tensors.back().name), i),
             "duplicate tensor name");
  }
  return info_at;
}

// Points each tensor at its data, which must lie inside the file.
void place_tensor_data(const Cursor& c, std::span<const uint8_t> bytes, uint64_t data_start,
                       const std::vector<size_t>& info_at, std::vector<TensorInfo>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto& ti = tensors[i];
    const std::string what = fmt::format("tensor '{}' (#{})", printable(ti.name), i);
    if (ti.offset >= bytes.size() || data_start + ti.offset >= bytes.size())
      c.fail(info_at[i], what,
             fmt::format("data offset {} (data section starts at byte {}) is past end of file "
                         "(size {})",
                         ti.offset, data_start, bytes.size()));
    const uint64_t begin = data_start + ti.offset;
    if (ti.nbytes > bytes.size() - begin)
      c.fail(info_at[i], what,
             fmt::format("data at byte {}, {} bytes long, ends past end of file (size {})", begin,
                         ti.nbytes, bytes.size()));
    ti.data = bytes.data() + begin;
  }
}

// No two tensors' data may share a byte: sorted by offset, each must end
// before the next begins.
void check_no_overlap(const Cursor& c, uint64_t data_start, const std::vector<size_t>& info_at,
                      const std::vector<TensorInfo>& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = tensors[order[k - 1]];
    const auto& cur = tensors[order[k]];
    if (prev.offset + prev.nbytes > cur.offset)
      c.fail(info_at[order[k]], fmt::format("tensor '{}' (#{})", printable(cur.name), order[k]),
             fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", data_start + cur.offset,
                         data_start + cur.offset + cur.nbytes, printable(prev.name),
                         data_start + prev.offset, data_start + prev.offset + prev.nbytes));
  }
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  const size_t n = std::min<size_t>(s.size(), 80);
  for (size_t i = 0; i < n; ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '\'')
      out += static_cast<char>(ch);
    else
      out += fmt::format("\\x{:02x}", ch);
  }
  if (s.size() > n) out += "...";
  return out;
}

void File::parse_into(File& f, std::span<const uint8_t> bytes) {
  Cursor c(bytes, f.path_);
  f.base_ = bytes.data();
  f.size_ = bytes.size();
  const Header h = read_header(c, bytes);
  f.version_ = h.version;
  const size_t alignment_at = read_metadata(c, h.n_kv, f.kv_);
  if (const Value* a = f.find("general.alignment"))
    f.alignment_ = alignment_of(c, *a, alignment_at);
  const std::vector<size_t> info_at = read_tensor_infos(c, h.n_tensors, f.alignment_, f.tensors_);
  const uint64_t data_start = align_up(c.pos(), f.alignment_);
  f.data_offset_ = static_cast<size_t>(std::min<uint64_t>(data_start, bytes.size()));
  place_tensor_data(c, bytes, data_start, info_at, f.tensors_);
  check_no_overlap(c, data_start, info_at, f.tensors_);
}

std::unique_ptr<File> File::parse(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<File> f(new File());
  f->path_ = std::move(name);
  parse_into(*f, bytes);
  return f;
}

std::unique_ptr<File> File::open(const std::filesystem::path& path) {
  std::unique_ptr<File> f(new File());
  f->path_ = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(fmt::format("{}: cannot open: {}", f->path_, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("{}: cannot stat: {}", f->path_, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FormatError(fmt::format("{}: not a regular file", f->path_));
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw FormatError(fmt::format("{}: at byte 0: magic: empty file", f->path_));
  }
  const size_t len = static_cast<size_t>(st.st_size);
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (m == MAP_FAILED)
    throw std::runtime_error(
        fmt::format("{}: cannot mmap {} bytes: {}", f->path_, len, std::strerror(e)));
  f->map_ = m;
  f->map_len_ = len;
  parse_into(*f, {static_cast<const uint8_t*>(m), len});  // on throw, ~File unmaps
  return f;
}

File::~File() {
  if (map_) ::munmap(map_, map_len_);
}

}  // namespace epyctune::engine::gguf
