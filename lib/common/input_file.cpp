#include "common/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace epyctune::common {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string size_text(uint64_t b) {
  if (b >= (uint64_t{1} << 20)) return fmt::format("{} MiB", b >> 20);
  if (b >= (uint64_t{1} << 10)) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} bytes", b);
}

std::string stat_problem(const struct stat& st, uint64_t max_bytes, std::string_view what) {
  if (!S_ISREG(st.st_mode))
    return fmt::format("it is {}, not a {} file: name a regular file", kind_of(st.st_mode), what);
  auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    return fmt::format("it is {}, more than a {} may be ({}): name the right file", size_text(size),
                       what, size_text(max_bytes));
  return "";
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string input_file_problem(const std::filesystem::path& path, uint64_t max_bytes,
                               std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? fmt::format("no such {} file", what)
                           : fmt::format("cannot read it: {}", std::strerror(errno));
  return stat_problem(st, max_bytes, what);
}

std::string read_input_file(const std::filesystem::path& path, uint64_t max_bytes,
                            std::string_view what) {
  auto fail = [&](const std::string& why) {
    throw InputFileError(fmt::format("{}: {}", path.string(), why));
  };
  // Checked by name first: opening a device can have effects of its own.
  if (auto why = input_file_problem(path, max_bytes, what); !why.empty()) fail(why);
  // O_NONBLOCK: should the path turn into a FIFO before the open, the open
  // does not wait for a writer, and fstat below refuses it.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)};
  if (f.fd < 0) fail(fmt::format("cannot open it: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(fmt::format("cannot stat it: {}", std::strerror(errno)));
  if (auto why = stat_problem(st, max_bytes, what); !why.empty()) fail(why);
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(fmt::format("read failed: {}", std::strerror(errno)));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes)
      fail(fmt::format("it grew past the {} limit of a {} while being read", size_text(max_bytes),
                       what));
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace epyctune::common
