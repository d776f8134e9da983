// Verification (step 9, steps/verify.cpp): a plan in which nothing should
// change, shown as a checklist — every knob, expected, actual, pass/fail/skip — in the formats
// operators feed to people and machines (table, json, md, junit, prometheus).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stack/plan.hpp"
#include "stack/text_report.hpp"

namespace epyctune::stack {

// One check's result; every format shows to_string's word.
enum class CheckResult { Pass, Fail, Skip };

std::string to_string(CheckResult r);  // "pass", "fail", "skip"
// nullopt for a word to_string never gives.
std::optional<CheckResult> check_result_from_string(std::string_view s);

struct CheckLine {
  std::string step, name, path;
  std::string expected, actual;
  CheckResult result = CheckResult::Skip;
  std::string reason;
  // The knob's identity (KnobLocation::key(): "value:/proc/irq/24/smp_affinity_list",
  // "msr:3:0xc0000108:0x2f"): what a metric names the check by, unchanged when
  // the knob's display name is reworded. "" = the path.
  std::string id;
  // Skipped because reading it was refused (EACCES, EPERM): the check needs
  // root, and says nothing about drift. `reason` names the read.
  bool needs_root = false;
};

struct Checklist {
  std::string profile;
  std::vector<CheckLine> lines;
  int passed = 0, failed = 0, skipped = 0;
  int needs_root = 0;  // of the skipped: checks this process may not read
  // When the checks were read (Unix seconds); make_checklist sets it to now.
  int64_t timestamp_seconds = 0;
  bool ok() const { return failed == 0; }
};

// ignore_missing: unsupported knobs are skipped instead of failing. A knob
// whose read was refused for want of privilege is skipped as needs_root,
// never failed: a monitoring agent without root sees no drift that is not there.
Checklist make_checklist(const std::vector<KnobPlan>& plans, const std::string& profile,
                         bool ignore_missing);

enum class ChecklistFormat { Table, Json, Markdown, Junit, Prometheus };
// Throws std::invalid_argument listing the accepted names.
ChecklistFormat parse_checklist_format(const std::string& name);
// The names parse_checklist_format accepts ("markdown" is an alias of "md"
// and not listed): verify --format's help and the bash completion's check.
std::vector<std::string_view> checklist_format_names();
// `text` shapes the table only (folding, colour); every other format lists
// every check.
std::string render_checklist(const Checklist& c, ChecklistFormat f, const TextOptions& text = {});

}  // namespace epyctune::stack
