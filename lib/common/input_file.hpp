// Files the operator names (a profile, a topology XML, the journal) are read
// whole. A mistaken or hostile path must not hang the run (a FIFO), fill
// memory (/dev/zero) or be parsed as something it is not (a directory): each
// is refused by name before a byte is read, and each kind has a size limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace epyctune::common {

// Far above any real file of the kind: the largest built-in profile is a few
// KiB, lstopo exports of 2-socket EPYCs with I/O a few MiB. (The journal is
// read through the sysroot and bounded in stack/journal.hpp.)
inline constexpr uint64_t kMaxProfileBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxTopologyXmlBytes = uint64_t{64} << 20;

class InputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why `path` cannot be read as a `what` ("profile", "topology XML", ...):
// missing, not a regular file (the message names the kind: FIFO, character
// device, directory, ...), or over max_bytes. "" when it can. Symlinks are
// followed; nothing is opened.
std::string input_file_problem(const std::filesystem::path& path, uint64_t max_bytes,
                               std::string_view what);

// The whole file, after the same checks on what was actually opened (a path
// swapped between the check and the read is caught too). Throws
// InputFileError "PATH: reason".
std::string read_input_file(const std::filesystem::path& path, uint64_t max_bytes,
                            std::string_view what);

}  // namespace epyctune::common
