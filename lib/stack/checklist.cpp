#include "stack/checklist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "common/did_you_mean.hpp"
#include "common/prometheus.hpp"
#include "common/text.hpp"
#include "common/text_table.hpp"

namespace epyctune::stack {

namespace {

using common::xml_escape;

// Multi-line values (file contents) are shown on one line.
std::string one_line(std::string s, size_t max = 60) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

// One series per check, named by ids only: `check` is the knob's identity
// (its location, never its display name, so rewording a name does not start
// a new series), `result` its word (pass, fail, skip): a skipped check is a
// state of its own, not a value that arithmetic mistakes for a number. The
// identity makes a series unique, since one repeated series makes
// node_exporter drop the whole file; an exact repeat (one knob planned
// twice) is written once.
std::string render_prometheus(const Checklist& c) {
  common::PromWriter w;
  w.build_info("epyctune_build_info", "The epyctune build that wrote these metrics (always 1).");
  w.family("epyctune_verify_ok", "gauge", "1 when no epyctune verify check failed, else 0.");
  w.sample("epyctune_verify_ok", c.ok() ? 1 : 0, {{"profile", c.profile}});
  w.family("epyctune_verify_timestamp_seconds", "gauge",
           "Unix time of the epyctune verify run these metrics come from.");
  w.sample("epyctune_verify_timestamp_seconds", double(c.timestamp_seconds),
           {{"profile", c.profile}});
  w.family("epyctune_verify_checks", "gauge", "Number of epyctune verify checks by result.");
  const std::pair<CheckResult, int> by_result[] = {
      {CheckResult::Pass, c.passed}, {CheckResult::Fail, c.failed}, {CheckResult::Skip, c.skipped}};
  for (const auto& [result, n] : by_result)
    w.sample("epyctune_verify_checks", n, {{"profile", c.profile}, {"result", to_string(result)}});
  w.family("epyctune_verify_check", "gauge",
           "One epyctune verify check, always 1: its result (pass, fail, skip) is the result "
           "label, its knob's identity the check label.");
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& l : c.lines) {
    const std::string& id = l.id.empty() ? l.path : l.id;
    if (!seen.insert({l.step, id}).second) continue;
    const std::string result = to_string(l.result);
    w.sample("epyctune_verify_check", 1,
             {{"profile", c.profile}, {"step", l.step}, {"check", id}, {"result", result}});
  }
  return w.take();
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : one_line(s, 80)) {
    if (c == '|') o += '\\';
    o += c;
  }
  return o;
}

std::pair<std::string, common::Tone> mark_of(const CheckLine& l) {
  if (l.needs_root) return {"[root]", common::Tone::warn};
  switch (l.result) {
    case CheckResult::Pass:
      return {"[ok]", common::Tone::good};
    case CheckResult::Fail:
      return {"[FAIL]", common::Tone::bad};
    case CheckResult::Skip:
      break;
  }
  return {"[skip]", common::Tone::dim};
}

// "prefetch/CPUs 0-255 PrefetchControl, ...": what could not be read.
std::string needing_root(const Checklist& c) {
  std::vector<FoldInput> in;
  std::vector<const CheckLine*> lines;
  for (const auto& l : c.lines)
    if (l.needs_root) {
      in.push_back({l.name, l.step});
      lines.push_back(&l);
    }
  std::string out;
  auto rows = fold_rows(in, true);
  for (size_t i = 0; i < rows.size() && i < 6; ++i)
    out += (i ? ", " : "") + lines[rows[i].members.front()]->step + "/" + rows[i].name;
  if (rows.size() > 6) out += fmt::format(" and {} more", rows.size() - 6);
  return out;
}

// One row per check, or with folding one per group of per-CPU checks that
// agree; the last line the verdict, naming what needs root.
std::string render_table(const Checklist& c, const TextOptions& o) {
  common::TextTable t;
  t.row({"", "STEP", "KNOB", "EXPECTED", "ACTUAL"});
  std::vector<FoldInput> in;
  for (const auto& l : c.lines)
    in.push_back({l.name, fmt::format("{}\n{}\n{}\n{}\n{}\n{}", mark_of(l).first, l.step,
                                      l.expected, l.actual, l.reason, l.path.empty())});
  for (const auto& row : fold_rows(in, !o.per_cpu)) {
    const auto& l = c.lines[row.members.front()];
    auto [mark, tone] = mark_of(l);
    t.row({{mark, tone},
           l.step,
           one_line(row.name, 44),
           one_line(l.expected, 40),
           one_line(l.actual, 40),
           l.reason.empty() ? "" : "-- " + one_line(l.reason, 160)});
  }
  std::string out = t.render(o.colour);
  std::string counts =
      fmt::format("{} passed, {} failed, {} skipped", c.passed, c.failed, c.skipped);
  if (!c.ok())
    out += "NOT VERIFIED: " + counts + "\n";
  else if (c.needs_root > 0)
    out += "INCOMPLETE: " + counts + "\n";
  else
    out += "VERIFIED: " + counts + "\n";
  if (c.needs_root > 0)
    out += fmt::format("{} check(s) need root, not counted as drift: {}; run verify as root\n",
                       c.needs_root, needing_root(c));
  return out;
}

// Each result's word, spelled once for to_string and check_result_from_string.
constexpr std::pair<CheckResult, std::string_view> kResultWords[] = {
    {CheckResult::Pass, "pass"}, {CheckResult::Fail, "fail"}, {CheckResult::Skip, "skip"}};

}  // namespace

std::string to_string(CheckResult r) {
  for (const auto& [result, word] : kResultWords)
    if (result == r) return std::string(word);
  return "unknown";
}

std::optional<CheckResult> check_result_from_string(std::string_view s) {
  for (const auto& [result, word] : kResultWords)
    if (word == s) return result;
  return std::nullopt;
}

Checklist make_checklist(const std::vector<KnobPlan>& plans, const std::string& profile,
                         bool ignore_missing) {
  Checklist c;
  c.profile = profile;
  c.timestamp_seconds = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  for (const auto& p : plans) {
    CheckLine l;
    l.step = p.knob.step;
    l.name = p.knob.name;
    l.path = p.knob.loc.path;
    l.expected = p.desired_display();
    l.actual = p.current.display();
    l.reason = p.reason;
    l.id = p.knob.loc.key();
    switch (p.status) {
      case PlanStatus::Unchanged:
        l.result = CheckResult::Pass;
        break;
      case PlanStatus::Change:
        l.result = CheckResult::Fail;
        if (l.reason.empty()) l.reason = "differs: run `epyctune apply`";
        break;
      case PlanStatus::Manual:
        l.result = CheckResult::Fail;
        break;
      case PlanStatus::Unsupported:
        if (p.read_errno == EACCES || p.read_errno == EPERM) {
          l.result = CheckResult::Skip;
          l.needs_root = true;
          // No path in the reason (the path field has it): per-CPU checks
          // that all need root then show as one row.
          l.actual = "(unreadable)";
          l.reason = fmt::format("needs root: reading it was refused ({})",
                                 p.read_errno == EACCES ? "EACCES" : "EPERM");
          c.needs_root++;
          break;
        }
        // A read fault is a failure even where missing knobs may be skipped.
        l.result = ignore_missing && p.read_errno == 0 ? CheckResult::Skip : CheckResult::Fail;
        l.reason = "unsupported: " + l.reason;
        break;
      case PlanStatus::Pending:
      case PlanStatus::Info:
        l.result = CheckResult::Skip;
        break;
    }
    (l.result == CheckResult::Pass   ? c.passed
     : l.result == CheckResult::Fail ? c.failed
                                     : c.skipped)++;
    c.lines.push_back(std::move(l));
  }
  return c;
}

namespace {

constexpr std::pair<std::string_view, ChecklistFormat> kFormats[] = {
    {"table", ChecklistFormat::Table},           {"json", ChecklistFormat::Json},
    {"md", ChecklistFormat::Markdown},           {"junit", ChecklistFormat::Junit},
    {"prometheus", ChecklistFormat::Prometheus},
};

}  // namespace

std::vector<std::string_view> checklist_format_names() {
  std::vector<std::string_view> out;
  for (const auto& [name, f] : kFormats) out.push_back(name);
  return out;
}

ChecklistFormat parse_checklist_format(const std::string& n) {
  if (n == "markdown") return ChecklistFormat::Markdown;
  for (const auto& [name, f] : kFormats)
    if (n == name) return f;
  std::vector<std::string> names;
  for (const auto& [name, f] : kFormats) names.emplace_back(name);
  names.emplace_back("markdown");
  std::string hint = common::did_you_mean(n, names);
  throw std::invalid_argument(
      fmt::format("unknown format '{}'{}: use table, json, md, junit or prometheus", n,
                  hint.empty() ? "" : " (" + hint + ")"));
}

std::string render_checklist(const Checklist& c, ChecklistFormat f, const TextOptions& text) {
  std::string out;
  switch (f) {
    case ChecklistFormat::Table:
      return render_table(c, text);
    case ChecklistFormat::Json: {
      nlohmann::json lines = nlohmann::json::array();
      for (const auto& l : c.lines)
        lines.push_back({{"step", l.step},
                         {"knob", l.name},
                         {"path", l.path},
                         {"expected", l.expected},
                         {"actual", l.actual},
                         {"result", to_string(l.result)},
                         {"reason", l.reason}});
      nlohmann::json j{{"schema_version", 1},        {"profile", c.profile}, {"ok", c.ok()},
                       {"passed", c.passed},         {"failed", c.failed},   {"skipped", c.skipped},
                       {"needs_root", c.needs_root}, {"checks", lines}};
      return j.dump(2) + "\n";
    }
    case ChecklistFormat::Markdown: {
      out += fmt::format("## epyctune verify: {}\n\n", c.profile);
      out += "| result | step | knob | expected | actual | reason |\n";
      out += "|---|---|---|---|---|---|\n";
      for (const auto& l : c.lines)
        out +=
            fmt::format("| {} | {} | {} | {} | {} | {} |\n", to_string(l.result), md_cell(l.step),
                        md_cell(l.name), md_cell(l.expected), md_cell(l.actual), md_cell(l.reason));
      out += fmt::format("\n**{}**: {} passed, {} failed, {} skipped\n",
                         c.ok() ? "verified" : "not verified", c.passed, c.failed, c.skipped);
      return out;
    }
    case ChecklistFormat::Junit: {
      out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
      out += fmt::format(
          "<testsuites><testsuite name=\"epyctune-verify {}\" tests=\"{}\" failures=\"{}\" "
          "skipped=\"{}\">\n",
          xml_escape(c.profile), c.lines.size(), c.failed, c.skipped);
      for (const auto& l : c.lines) {
        out += fmt::format("  <testcase classname=\"{}\" name=\"{}\">", xml_escape(l.step),
                           xml_escape(l.name));
        std::string msg = fmt::format("expected {}, actual {}{}", one_line(l.expected),
                                      one_line(l.actual), l.reason.empty() ? "" : ": " + l.reason);
        if (l.result == CheckResult::Fail)
          out += fmt::format("<failure message=\"{}\"/>", xml_escape(msg));
        else if (l.result == CheckResult::Skip)
          out += fmt::format("<skipped message=\"{}\"/>", xml_escape(msg));
        out += "</testcase>\n";
      }
      out += "</testsuite></testsuites>\n";
      return out;
    }
    case ChecklistFormat::Prometheus:
      return render_prometheus(c);
  }
  return out;
}

}  // namespace epyctune::stack
