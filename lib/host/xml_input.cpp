#include "host/xml_input.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "common/input_file.hpp"
#include "common/text.hpp"
#include "host/discover.hpp"

namespace epyctune::host::detail {

namespace {

constexpr const char* kExportV2 =
    "export it on the source machine as hwloc 2 XML: with hwloc 3, `lstopo --of v2xml FILE.xml`; "
    "with hwloc 2.x, `lstopo --of xml FILE.xml`";

// hwloc reads HWLOC_XML_VERBOSE once, at its first XML import: set it for the
// whole process before that, so a later failure can still say why.
struct VerboseOnce {
  VerboseOnce() { ::setenv("HWLOC_XML_VERBOSE", "1", 0); }
};

// hwloc's stderr as one line; warnings about attributes it skips are noise
// next to the real reason.
std::string hwloc_messages(const std::string& text) {
  std::string said;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = common::trim(text.substr(pos, nl == std::string::npos ? nl : nl - pos));
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty() || line.find("ignoring unknown") != std::string::npos) continue;
    said += (said.empty() ? "" : " ") + line;
  }
  return said;
}

}  // namespace

std::string read_topology_xml(const std::string& path) {
  try {
    return common::read_input_file(path, common::kMaxTopologyXmlBytes, "topology XML");
  } catch (const common::InputFileError& e) {
    throw DiscoveryError(
        fmt::format("cannot read topology XML {}; give an lstopo XML export "
                    "(lstopo --of xml FILE.xml)",
                    e.what()));
  }
}

std::string xml_format_problem(const std::string& xml) {
  // The root element comes within the first few hundred bytes of any export:
  // <topology version="MAJOR.MINOR">.
  std::string_view head(xml.data(), std::min<size_t>(xml.size(), 4096));
  size_t tag = head.find("<topology");
  if (tag == std::string_view::npos) return "";
  size_t end = head.find('>', tag);
  std::string_view attrs = head.substr(tag, end == std::string_view::npos ? end : end - tag);
  size_t v = attrs.find("version=\"");
  if (v == std::string_view::npos) return "";
  std::string_view version = attrs.substr(v + 9);
  version = version.substr(0, version.find('"'));
  int major = 0;
  auto [p, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  if (ec != std::errc() || major < 3) return "";
  return fmt::format(
      "it is in hwloc's XML format {}, written by hwloc 3 or later; this build uses hwloc {} "
      "(Debian 12 ships 2.9), which reads only format 2 and older: {}",
      std::string(version.substr(0, 16)), HWLOC_VERSION, kExportV2);
}

ImportTrial try_import(const std::string& xml) {
  static VerboseOnce verbose;  // before the fork: the child's hwloc reads it
  constexpr int kRefused = 3;  // a clean failure, told apart from a crash
  ImportTrial trial;
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    trial.loads = true;  // cannot tell: the import runs here as it always did
    return trial;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    trial.loads = true;
    return trial;
  }
  if (pid == 0) {
    // A crash here is the answer, not an event: no sanitizer or fuzzer
    // handler reports it, the signal just ends the child.
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::signal(sig, SIG_DFL);
    ::dup2(pipefd[1], 2);         // hwloc's messages go to the parent
    ::unsetenv("HWLOC_XMLFILE");  // would override the buffer
    ::unsetenv("HWLOC_FSROOT");
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) ::_exit(kRefused);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    int rc = hwloc_topology_set_xmlbuffer(t, xml.data(), static_cast<int>(xml.size())) == 0
                 ? hwloc_topology_load(t)
                 : -1;
    std::fflush(stderr);
    ::_exit(rc == 0 ? 0 : kRefused);
  }
  ::close(pipefd[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (text.size() < 16384) text.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      trial.loads = true;
      return trial;
    }
  trial.said = hwloc_messages(text);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    trial.loads = true;
  else if (!WIFEXITED(status) || WEXITSTATUS(status) != kRefused)
    trial.crashed = fmt::format("hwloc {} crashes reading it ({}): it is not a valid lstopo export",
                                HWLOC_VERSION,
                                WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                                    : fmt::format("exit {}", WEXITSTATUS(status)));
  return trial;
}

int capture_hwloc_messages(const std::function<int()>& fn, std::string& said) {
  static VerboseOnce verbose;
  int fd = ::memfd_create("hwloc-messages", MFD_CLOEXEC);
  if (fd < 0) return fn();
  std::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  int rc = fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text(4096, '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  said = hwloc_messages(text);
  return rc;
}

}  // namespace epyctune::host::detail
