// Small text helpers for the formats knobs live in: TOML sections of the
// engine launch config, resctrl schemata lines, the kernel command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/text.hpp"

namespace epyctune::stack {

using common::trim;

// "0x2f", "2f" (with a 0x prefix only), "47": throws std::invalid_argument naming the text.
uint64_t parse_u64(std::string_view text);

// The text of "[name]" up to the next section header, header line included;
// nullopt when the file has no such section.
std::optional<std::string> toml_section(const std::string& file, const std::string& name);
// The file with section `name` replaced by `section_text` (appended when absent).
std::string replace_toml_section(const std::string& file, const std::string& name,
                                 const std::string& section_text);

// The mask token of one L3 domain in a schemata file ("L3:0=ffff;1=ff").
std::optional<std::string> schemata_domain(const std::string& file, int domain);
// The file with that domain's mask replaced (added when missing), every other
// byte kept, so restoring the original token gives back the original bytes.
std::string merge_schemata_domain(const std::string& file, int domain, const std::string& mask);

// Value of `name=value` on a kernel command line; "" for a bare flag; nullopt if absent.
std::optional<std::string> cmdline_param(const std::string& cmdline, const std::string& name);

// True when `s` is well-formed UTF-8 (what a JSON string can hold unchanged).
bool is_utf8(std::string_view s);
// RFC 4648 base64 with padding, for bytes that are not UTF-8.
std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not valid padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace epyctune::stack
