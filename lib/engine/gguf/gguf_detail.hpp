// Helpers shared by the GGUF reader and writer; not part of the public API.
#pragma once

#include <string>
#include <string_view>

namespace epyctune::engine::gguf {

// A name from an untrusted file, safe to print in an error message:
// non-printable bytes escaped, long names cut.
std::string printable(std::string_view s);

}  // namespace epyctune::engine::gguf
