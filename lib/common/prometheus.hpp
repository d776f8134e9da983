// Prometheus text exposition (format 0.0.4): the one writer serve, the
// daemon and the verify checklist emit through, so escaping and the
// family rules are written once.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace epyctune::common {

// A label value as the exposition format wants it: backslash, double quote
// and newline escaped; nothing else is special.
std::string prom_label_value(std::string_view v);

struct PromLabel {
  std::string_view name;
  std::string_view value;  // escaped by the writer
};

class PromWriter {
 public:
  // HELP and TYPE, once per family, before its samples: a scraper (and
  // node_exporter's textfile collector) rejects repeated or interleaved
  // families.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample of the current family (or of its _bucket/_sum/_count).
  void sample(std::string_view name, double value, std::initializer_list<PromLabel> labels = {});
  // The same, with labels chosen at run time.
  void sample(std::string_view name, double value, std::span<const PromLabel> labels);
  // A family with its one unlabelled sample.
  void single(std::string_view name, std::string_view type, std::string_view help, double value);
  // `name{version="0.1.0",compiler="gcc 12.2.0"} 1`: which build wrote the
  // metrics, the usual *_build_info gauge to join other series on.
  void build_info(std::string_view name, std::string_view help);
  // Text written by another PromWriter (or renderer) as it is.
  void append(std::string_view text) { out_ += text; }
  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace epyctune::common
