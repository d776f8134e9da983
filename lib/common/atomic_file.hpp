// Files that other programs read while we rewrite them (a node_exporter
// textfile, the daemon's state) must never be seen half written: the content
// goes to a temporary file beside the target and is renamed over it, so a
// reader sees the old file or the new one, never a mix.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>

namespace epyctune {

// Writes `content` to `path` atomically: a uniquely named temporary file in the
// same directory (O_EXCL), fully written, fsynced and chmodded to `mode`, then
// renamed over `path`, and the directory fsynced so the rename survives a
// crash. On any failure the temporary is removed and std::runtime_error names
// the path and the errno text; `path` is left as it was.
void write_file_atomic(const std::filesystem::path& path, std::string_view content,
                       mode_t mode = 0644);

}  // namespace epyctune
