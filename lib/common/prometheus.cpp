#include "common/prometheus.hpp"

#include <fmt/format.h>

#include "common/version.hpp"

namespace epyctune::common {

std::string prom_label_value(std::string_view v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

void PromWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PromWriter::sample(std::string_view name, double value,
                        std::initializer_list<PromLabel> labels) {
  sample(name, value, std::span<const PromLabel>(labels.begin(), labels.size()));
}

void PromWriter::sample(std::string_view name, double value, std::span<const PromLabel> labels) {
  out_ += name;
  if (labels.size() > 0) {
    out_ += '{';
    bool first = true;
    for (const auto& l : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += l.name;
      out_ += "=\"";
      out_ += prom_label_value(l.value);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += fmt::format(" {}\n", value);
}

void PromWriter::single(std::string_view name, std::string_view type, std::string_view help,
                        double value) {
  family(name, type, help);
  sample(name, value);
}

void PromWriter::build_info(std::string_view name, std::string_view help) {
#if defined(__clang__)
  const std::string compiler =
      fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  const std::string compiler =
      fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  const std::string compiler = "unknown";
#endif
  family(name, "gauge", help);
  sample(name, 1, {{"version", kVersion}, {"compiler", compiler}});
}

}  // namespace epyctune::common
