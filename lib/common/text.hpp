// Text helpers every library needs; one copy of each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace epyctune::common {

// Without leading and trailing blanks (space, tab, CR, LF): the shape of a
// sysfs value, a TOML scalar or a line of /proc.
std::string_view trim_view(std::string_view s);
std::string trim(std::string_view s);

// Text read from the host (cpuinfo, an hwloc export, a path) made valid UTF-8:
// each byte that does not start a well-formed sequence becomes U+FFFD. JSON
// output needs valid UTF-8, and a garbled model name must not stop `detect`.
std::string valid_utf8(std::string_view s);
// Whether s is well-formed UTF-8 already (valid_utf8 would change nothing).
bool is_valid_utf8(std::string_view s);

// The deepest nesting of [ and { outside JSON strings, by a linear scan that
// stops once it passes `stop_after`: a parser's input is refused for its
// depth before anything is built from it, and the scan itself needs no stack.
size_t json_depth(std::string_view text, size_t stop_after = SIZE_MAX);

// Text for an XML attribute or element: & < > " ' as entities.
std::string xml_escape(std::string_view s);

}  // namespace epyctune::common
