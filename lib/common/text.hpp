// Text helpers every library needs; one copy of each.
#pragma once

#include <string>
#include <string_view>

namespace epyctune::common {

// Without leading and trailing blanks (space, tab, CR, LF): the shape of a
// sysfs value, a TOML scalar or a line of /proc.
std::string_view trim_view(std::string_view s);
std::string trim(std::string_view s);

}  // namespace epyctune::common
