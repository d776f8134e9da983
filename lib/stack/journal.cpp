#include "stack/journal.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>

#include "common/version.hpp"

namespace epyctune::stack {

using nlohmann::json;

JournalError::JournalError(const std::string& path, int line, const std::string& problem)
    : std::runtime_error(
          line > 0
              ? fmt::format("journal {} line {}: {}. The journal holds the original values that "
                            "`epyctune revert` restores: repair that record rather than "
                            "deleting the file",
                            path, line, problem)
              : fmt::format("journal {}: {}", path, problem)),
      line_(line) {}

const char* journal_writer_version() {
  return epyctune::kVersion.data();
}

namespace {

constexpr int kLegacyFormat = 1;
constexpr int kFormat = 2;
constexpr std::string_view kSealMagic = "EPYCTUNE-JOURNAL 2 ";

uint32_t crc_of(std::string_view s) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0),
                                       reinterpret_cast<const Bytef*>(s.data()),
                                       static_cast<uInt>(s.size())));
}

std::string seal_text(uint64_t records, uint64_t length) {
  auto body = fmt::format("{}records={:08d} length={:012d}", kSealMagic, records, length);
  return fmt::format("{} crc={:08x}\n", body, crc_of(body));
}

const size_t kSealSize = seal_text(0, 0).size();

std::string record_text(const json& j) {
  return journal_record(j.dump());
}

// The whole journal, opened without following a symlink and without blocking
// on a FIFO; nullopt when absent. Anything but a bounded regular file throws.
std::optional<std::string> read_journal(const host::Sysroot& sys) {
  std::string path = sys.resolve(kJournalPath).string();
  auto fd = sys.open_beneath(kJournalPath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP)
      throw JournalError(path, 0,
                         "is a symbolic link; the journal must be a regular file. Move the link "
                         "aside and look for the real journal it pointed to");
    throw host::HostError("open journal", path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw host::HostError("stat journal", path, errno);
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a plain file";
    throw JournalError(path, 0,
                       fmt::format("is {}, not a regular file: move it aside (epyctune only ever "
                                   "writes a regular file there)",
                                   what));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxJournalBytes)
    throw JournalError(path, 0,
                       fmt::format("is {} bytes, more than the {} a journal can reach: refusing "
                                   "to read it",
                                   st.st_size, kMaxJournalBytes));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw host::HostError("read journal", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxJournalBytes)
      throw JournalError(path, 0, "grew past its size bound while being read");
  }
  return out;
}

// One record's JSON object into `c`. Throws JournalError on bad content.
void parse_record(const std::string& path, int line_no, const json& j, int format,
                  JournalContents& c) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw JournalError(path, line_no, "not a journal record (no \"type\")");
  std::string type = j["type"];
  int header_line = format == kLegacyFormat ? 1 : 2;
  try {
    if (type == "header") {
      if (line_no != header_line) throw std::runtime_error("a header may only be the first record");
      int version = j.value(format == kLegacyFormat ? "version" : "format", 0);
      if (version != format)
        throw std::runtime_error(
            fmt::format("unsupported journal format {} (this epyctune reads formats {} and {})",
                        version, kLegacyFormat, kFormat));
      c.created_dirs = j.at("created_dirs").get<std::vector<std::string>>();
      c.writer = j.value("epyctune", "");
    } else if (type == "original") {
      JournalEntry e;
      e.line = line_no;
      e.step = j.at("step").get<std::string>();
      e.name = j.at("name").get<std::string>();
      e.profile = j.value("profile", "");
      e.loc = KnobLocation::from_json(j.at("knob"));
      e.original = KnobValue::from_json(j.at("original"));
      c.entries.push_back(std::move(e));
    } else {
      throw std::runtime_error(fmt::format("unknown record type '{}'", type));
    }
  } catch (const JournalError&) {
    throw;
  } catch (const std::exception& e) {
    throw JournalError(path, line_no, e.what());
  }
}

json parse_json(const std::string& path, int line_no, std::string_view text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double.
    throw JournalError(path, line_no, fmt::format("not valid JSON ({})", e.what()));
  }
}

// Format 1: JSON lines. Without a seal a cut at a line boundary cannot be
// seen; a cut inside the last line can, and is damage (it may have been a
// knob's only original).
void load_legacy(const std::string& path, const std::string& text, JournalContents& c) {
  c.format = kLegacyFormat;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    ++line_no;
    if (nl == std::string::npos) {
      c.damage.push_back(fmt::format(
          "line {} (byte offset {}) is cut short: the record there is lost", line_no, pos));
      break;
    }
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    parse_record(path, line_no, parse_json(path, line_no, line), kLegacyFormat, c);
    c.intact_end = pos;
  }
}

// "<length> <crc32> <json>" -> the JSON text, or nullopt when the framing or
// checksum does not hold.
std::optional<std::string_view> unframe(std::string_view line) {
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 10) return std::nullopt;
  uint64_t len = 0;
  auto [p, ec] = std::from_chars(line.data(), line.data() + sp1, len);
  if (ec != std::errc() || p != line.data() + sp1) return std::nullopt;
  if (line.size() < sp1 + 10 || line[sp1 + 9] != ' ') return std::nullopt;
  uint32_t crc = 0;
  auto [q, ec2] = std::from_chars(line.data() + sp1 + 1, line.data() + sp1 + 9, crc, 16);
  if (ec2 != std::errc() || q != line.data() + sp1 + 9) return std::nullopt;
  std::string_view body = line.substr(sp1 + 10);
  if (body.size() != len || crc_of(body) != crc) return std::nullopt;
  return body;
}

bool parse_seal(std::string_view text, uint64_t& records, uint64_t& length) {
  if (text.size() < kSealSize) return false;
  std::string_view seal = text.substr(0, kSealSize);
  if (!seal.starts_with(kSealMagic) || seal.back() != '\n') return false;
  size_t r = kSealMagic.size() + 8, l = r + 8 + 8, k = l + 12 + 5;
  auto num = [&](size_t at, size_t n, uint64_t& out, int base) {
    auto [p, ec] = std::from_chars(seal.data() + at, seal.data() + at + n, out, base);
    return ec == std::errc() && p == seal.data() + at + n;
  };
  uint64_t crc = 0;
  if (!num(r, 8, records, 10) || !num(l, 12, length, 10) || !num(k, 8, crc, 16)) return false;
  return seal_text(records, length) == seal;
}

void load_sealed(const std::string& path, const std::string& text, JournalContents& c) {
  c.format = kFormat;
  bool sealed = parse_seal(text, c.sealed_records, c.sealed_bytes);
  size_t pos = kSealSize;
  if (!sealed) {
    c.damage.push_back(
        "line 1 (byte offset 0), the seal that counts the committed records, is damaged: "
        "records may be missing");
    size_t nl = text.find('\n');
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  c.intact_end = pos;
  uint64_t intact_sealed = 0;
  int line_no = 1;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    auto body = nl == std::string::npos ? std::nullopt
                                        : unframe(std::string_view(text).substr(pos, end - pos));
    if (!body) {
      if (sealed && pos >= c.sealed_bytes) {
        // Past the seal: an append the process did not finish; its knob was
        // never written (the seal advances before the knob is touched).
        c.torn_tail = fmt::format("line {} (byte offset {})", line_no, pos);
        break;
      }
      c.damage.push_back(
          fmt::format("line {} (byte offset {}) {}: the record there is lost", line_no, pos,
                      nl == std::string::npos ? "is cut short" : "fails its length or checksum"));
      if (nl == std::string::npos) break;
      pos = nl + 1;
      continue;
    }
    parse_record(path, line_no, parse_json(path, line_no, *body), kFormat, c);
    pos = nl + 1;
    c.intact_end = pos;
    if (pos <= c.sealed_bytes) ++intact_sealed;
  }
  if (!sealed) return;
  if (text.size() < c.sealed_bytes)
    c.damage.push_back(
        fmt::format("the file ends at byte {} but {} bytes were committed: what followed is lost",
                    text.size(), c.sealed_bytes));
  else if (intact_sealed < c.sealed_records && c.damage.empty())
    c.damage.push_back(fmt::format("{} records were committed but only {} are intact",
                                   c.sealed_records, intact_sealed));
}

}  // namespace

std::string journal_record(const std::string& json_text) {
  return fmt::format("{} {:08x} {}\n", json_text.size(), crc_of(json_text), json_text);
}

JournalContents Journal::load() const {
  JournalContents c;
  auto text = read_journal(sys_);
  if (!text) return c;
  c.exists = true;
  std::string path = sys_.resolve(kJournalPath).string();
  if (!text->empty() && text->front() == '{')
    load_legacy(path, *text, c);
  else
    load_sealed(path, *text, c);
  return c;
}

void Journal::write_seal() {
  std::string path = sys_.resolve(kJournalPath).string();
  auto seal = seal_text(records_, length_);
  if (::pwrite(fd_.get(), seal.data(), seal.size(), 0) != static_cast<ssize_t>(seal.size()))
    throw host::HostError("write journal seal", path, errno ? errno : EIO);
  if (::fsync(fd_.get()) != 0) throw host::HostError("fsync journal", path, errno);
}

void Journal::open_for_append(const JournalContents& current,
                              const std::vector<std::string>& created) {
  std::string path = sys_.resolve(kJournalPath).string();
  if (!current.damage.empty())
    throw JournalError(
        path, 0,
        "is damaged (" + current.damage.front() + "): run `epyctune revert` before applying again");
  if (!current.exists || current.format == kLegacyFormat) {
    // Written whole and renamed into place: a crash leaves no half journal.
    std::vector<std::string> dirs = current.exists ? current.created_dirs : created;
    std::string body = record_text(json{{"type", "header"},
                                        {"format", kFormat},
                                        {"epyctune", journal_writer_version()},
                                        {"created_dirs", dirs}});
    for (const auto& e : current.entries)
      body += record_text(json{{"type", "original"},
                               {"step", e.step},
                               {"name", e.name},
                               {"profile", e.profile},
                               {"knob", e.loc.to_json()},
                               {"original", e.original.to_json()}});
    sys_.write_file_atomic(
        kJournalPath, seal_text(1 + current.entries.size(), kSealSize + body.size()) + body, 0600);
  }
  fd_ = sys_.open_or_throw("open journal", kJournalPath, O_RDWR | O_NOFOLLOW | O_NONBLOCK);
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) throw host::HostError("stat journal", path, errno);
  if (!S_ISREG(st.st_mode)) throw JournalError(path, 0, "is not a regular file");
  if ((st.st_mode & 07777) != 0600 && ::fchmod(fd_.get(), 0600) != 0)
    throw host::HostError("chmod journal", path, errno);
  // Re-read under the lock: what we append after must be what is there.
  auto now = load();
  if (!now.damage.empty()) throw JournalError(path, 0, "is damaged: " + now.damage.front());
  records_ = now.entries.size() + 1;
  length_ = now.intact_end;
  if (static_cast<uint64_t>(st.st_size) != length_ || now.sealed_records != records_ ||
      now.sealed_bytes != length_) {
    // A torn append past the seal: cut it off and seal what is intact.
    if (::ftruncate(fd_.get(), static_cast<off_t>(length_)) != 0)
      throw host::HostError("truncate journal", path, errno);
    write_seal();
  }
}

void Journal::append(const JournalEntry& e) {
  std::string path = sys_.resolve(kJournalPath).string();
  if (!fd_) throw std::logic_error("journal append before open_for_append");
  json j{{"type", "original"},   {"step", e.step},          {"name", e.name},
         {"profile", e.profile}, {"knob", e.loc.to_json()}, {"original", e.original.to_json()}};
  // Strict UTF-8: values are base64 where needed, so nothing is replaced.
  std::string rec = record_text(j);
  if (length_ + rec.size() > kMaxJournalBytes)
    throw JournalError(path, 0, "would grow past its size bound");
  ssize_t n = ::pwrite(fd_.get(), rec.data(), rec.size(), static_cast<off_t>(length_));
  if (n != static_cast<ssize_t>(rec.size()))
    throw host::HostError("append journal", path, n < 0 ? errno : EIO);
  if (::fsync(fd_.get()) != 0) throw host::HostError("fsync journal", path, errno);
  length_ += rec.size();
  ++records_;
  write_seal();
}

void Journal::remove() const {
  if (sys_.exists_nofollow(kJournalPath)) sys_.remove_file(kJournalPath);
}

std::vector<std::string> ensure_state_dir(const host::Sysroot& sys) {
  std::vector<std::string> created;
  std::string path;
  std::string_view rest = kStateDir;
  while (!rest.empty()) {
    rest.remove_prefix(1);
    auto slash = rest.find('/');
    path += "/" + std::string(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
    if (sys.is_dir(path)) continue;
    try {
      sys.make_dir(path);
      created.push_back(path);
    } catch (const host::HostError& e) {
      // Another epyctune starting at the same moment made it first.
      if (e.err() != EEXIST || !sys.is_dir(path)) throw;
    }
  }
  return created;
}

}  // namespace epyctune::stack
