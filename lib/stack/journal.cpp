#include "stack/journal.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace epyctune::stack {

using nlohmann::json;

JournalError::JournalError(const std::string& path, int line, const std::string& problem)
    : std::runtime_error(fmt::format(
          "journal {} line {}: {}. The journal holds the original values that `epyctune revert` "
          "restores: repair that line (one JSON object per line) rather than deleting the file",
          path, line, problem)),
      line_(line) {}

namespace {

constexpr int kVersion = 1;

void fsync_parent(const std::filesystem::path& p) {
  int fd = ::open(p.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

JournalContents Journal::load() const {
  JournalContents c;
  auto text = sys_.read(kJournalPath);
  if (!text) return c;
  c.exists = true;
  std::string path = sys_.resolve(kJournalPath).string();
  size_t pos = 0;
  int line_no = 0;
  while (pos < text->size()) {
    size_t nl = text->find('\n', pos);
    ++line_no;
    if (nl == std::string::npos) {
      // Appends are one write() of a whole line followed by fsync, and the
      // knob is written only after that: a line cut short means the process
      // died inside the append, before touching the knob. Nothing to restore.
      c.torn_tail = text->substr(pos);
      break;
    }
    std::string line = text->substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw JournalError(path, line_no, fmt::format("not valid JSON ({})", e.what()));
    }
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
      throw JournalError(path, line_no, "not a journal record (no \"type\")");
    std::string type = j["type"];
    try {
      if (type == "header") {
        if (line_no != 1) throw std::runtime_error("a header may only be the first line");
        if (j.value("version", 0) != kVersion)
          throw std::runtime_error(
              fmt::format("unsupported journal version {} (this epyctune "
                          "reads version {})",
                          j.value("version", 0), kVersion));
        c.created_dirs = j.at("created_dirs").get<std::vector<std::string>>();
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
  return c;
}

void Journal::append_line(const std::string& line) const {
  auto path = sys_.resolve(kJournalPath);
  bool existed = sys_.exists(kJournalPath);
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw host::HostError("open journal", path.string(), errno);
  std::string data = line + "\n";
  ssize_t n = ::write(fd, data.data(), data.size());
  int err = errno;
  if (n != static_cast<ssize_t>(data.size())) {
    ::close(fd);
    throw host::HostError("append journal", path.string(), n < 0 ? err : EIO);
  }
  if (::fsync(fd) != 0) {
    err = errno;
    ::close(fd);
    throw host::HostError("fsync journal", path.string(), err);
  }
  ::close(fd);
  if (!existed) fsync_parent(path);
}

void Journal::ensure_header(const std::vector<std::string>& created_dirs) const {
  if (sys_.exists(kJournalPath)) return;
  append_line(
      json{{"type", "header"}, {"version", kVersion}, {"created_dirs", created_dirs}}.dump());
}

void Journal::append(const JournalEntry& e) const {
  json j{{"type", "original"},   {"step", e.step},          {"name", e.name},
         {"profile", e.profile}, {"knob", e.loc.to_json()}, {"original", e.original.to_json()}};
  // Host files are text; should one not be UTF-8, keep its bytes readable
  // rather than failing the write-ahead step.
  append_line(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

void Journal::remove() const {
  if (sys_.exists(kJournalPath)) sys_.remove_file(kJournalPath);
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
    if (!sys.is_dir(path)) {
      sys.make_dir(path);
      created.push_back(path);
    }
  }
  return created;
}

}  // namespace epyctune::stack
