#include "bench/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/text.hpp"

namespace epyctune::bench {

namespace {

using common::xml_escape;

std::string pct(double x) {
  return fmt::format("{:+.1f}%", 100.0 * x);
}

std::string verdict_of(const std::optional<Comparison>& c) {
  return c ? verdict_name(c->verdict) : "-";
}

nlohmann::json comparison_json(const std::optional<Comparison>& c, double delta) {
  if (!c) return nullptr;
  return {{"delta", delta},
          {"diff_tok_s", c->ci.diff},
          {"ci95_tok_s", {c->ci.lo, c->ci.hi}},
          {"mann_whitney_p", c->mw.p},
          {"verdict", verdict_name(c->verdict)}};
}

}  // namespace

std::string to_text(const StepwiseResult& r, const ReportContext& c) {
  std::string out =
      fmt::format("Profile {}, model {}{}; {} tokens per run, {} interleaved round(s){}\n",
                  c.profile, c.model, c.draft.empty() ? "" : ", draft " + c.draft, c.tokens,
                  r.rounds, r.interrupted ? " (interrupted)" : "");
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  out += fmt::format("{:>2} {:<10} {:>9} {:>7} {:>9} {:<16} {:>9} {:<16} {:>9} {:>9}  {}\n", "#",
                     "step", "tok/s", "spread", "vs prev", "verdict", "vs stock", "verdict",
                     "roofline", "expected", "status");
  for (const auto& row : r.rows) {
    const std::string expected =
        row.expected_tok_s ? fmt::format("{:.1f}", *row.expected_tok_s) : "none";
    if (!row.measured()) {
      out += fmt::format("{:>2} {:<10} {:>9} {:>7} {:>9} {:<16} {:>9} {:<16} {:>9} {:>9}  {}\n",
                         row.ref.step, row.ref.name, "-", "-", "-", "-", "-", "-", "-", expected,
                         row.status());
      continue;
    }
    out += fmt::format(
        "{:>2} {:<10} {:>9.2f} {:>6.1f}% {:>9} {:<16} {:>9} {:<16} {:>9.2f} {:>9}  {}\n",
        row.ref.step, row.ref.name, row.tok_s.median, 100 * row.tok_s.spread,
        row.vs_prev ? pct(row.delta_prev) : "-", verdict_of(row.vs_prev),
        row.vs_stock ? pct(row.delta_stock) : "-", verdict_of(row.vs_stock), row.roofline_tok_s,
        expected, row.cpus.empty() ? "measured" : "measured on CPUs " + row.cpus);
  }
  out += fmt::format(
      "tok/s: median of the runs; spread: (max - min) / median; verdict: 95% bootstrap CI of "
      "the median difference (runs, then token blocks, resampled) excludes 0 = significant; "
      "roofline: read bandwidth on the CPUs used / weight bytes per token{}\n",
      r.rows.size() > 1 ? " (x tokens per target pass when speculative)" : "");
  std::string figures;
  for (const auto& [k, v] : c.expectations)
    figures += fmt::format("{}{} {:g}", figures.empty() ? "" : ", ", k, v);
  bool any = false;
  for (const auto& row : r.rows) any |= row.expected_tok_s.has_value();
  if (c.expectations.empty())
    out += "expected: none stated by the profile\n";
  else
    out += fmt::format("expected: {}; the profile's figures: {} tok/s ({}{})\n",
                       any ? "the profile's figure for each step" : "none stated for these steps",
                       figures, c.expectations_source,
                       c.expectations_model.empty() ? "" : ", for " + c.expectations_model);
  return out;
}

nlohmann::json to_json(const StepwiseResult& r, const ReportContext& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json j{{"step", row.ref.step},
                     {"name", row.ref.name},
                     {"title", row.ref.title},
                     {"status", row.status()},
                     {"measured", row.measured()},
                     {"expected_tok_s", row.expected_tok_s ? nlohmann::json(*row.expected_tok_s)
                                                           : nlohmann::json("none stated")}};
    if (row.measured()) {
      std::vector<double> tps, bw;
      nlohmann::json blocks = nlohmann::json::array();
      for (const auto& s : row.samples) tps.push_back(s.tok_s), blocks.push_back(s.block_tok_s);
      j["tok_s"] = {
          {"median", row.tok_s.median}, {"min", row.tok_s.min}, {"max", row.tok_s.max},
          {"spread", row.tok_s.spread}, {"samples", tps},       {"block_samples", blocks}};
      j["vs_previous"] = comparison_json(row.vs_prev, row.delta_prev);
      j["previous_step"] =
          row.prev >= 0 ? nlohmann::json(r.rows[static_cast<size_t>(row.prev)].ref.name) : nullptr;
      j["vs_stock"] = comparison_json(row.vs_stock, row.delta_stock);
      j["bandwidth_gbps"] = {{"median", row.bandwidth_gbps},
                             {"samples", row.bandwidth_samples_gbps}};
      j["bytes_per_token"] = row.samples.back().bytes_per_token;
      j["tokens_per_target_pass"] = row.samples.back().tokens_per_pass;
      j["roofline_tok_s"] = row.roofline_tok_s;
      j["cpus"] = row.cpus;
      j["note"] = row.note;
      j["engine_launch"] = row.samples.back().engine_launch;
    }
    rows.push_back(std::move(j));
  }
  return {{"schema_version", 1},
          {"profile", c.profile},
          {"model", c.model},
          {"draft", c.draft.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.draft)},
          {"tokens", c.tokens},
          {"repeat", c.repeat},
          {"rounds", r.rounds},
          {"interrupted", r.interrupted},
          {"expectations",
           {{"source", c.expectations_source},
            {"model", c.expectations_model},
            {"figures", c.expectations}}},
          {"notes", c.notes},
          {"launch_plan", c.launch_plan},
          {"rows", rows}};
}

namespace {

// Where things go on the chart: one slot per row, values scaled to a round top.
struct Chart {
  double W = 0, H = 460, left = 80, right = 40, top = 60, bottom = 110;
  double plot_w = 0, plot_h = 0, top_v = 1, slot = 0, bar = 0;
  double y(double v) const { return top + plot_h * (1 - v / top_v); }
  double cx(int i) const { return left + slot * (i + 0.5); }
};

Chart chart_geometry(const StepwiseResult& r) {
  Chart g;
  const int n = std::max(static_cast<int>(r.rows.size()), 1);
  g.W = 120.0 * n + 140;
  g.plot_w = g.W - g.left - g.right;
  g.plot_h = g.H - g.top - g.bottom;
  double ymax = 0;
  for (const auto& row : r.rows)
    if (row.measured()) ymax = std::max(ymax, row.tok_s.max);
  if (ymax <= 0) ymax = 1;
  // A round upper bound: 1, 2 or 5 times a power of ten.
  const double mag = std::pow(10.0, std::floor(std::log10(ymax)));
  g.top_v = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= ymax * 1.1) {
      g.top_v = m * mag;
      break;
    }
  g.slot = g.plot_w / n;
  g.bar = g.slot * 0.55;
  return g;
}

std::string svg_frame(const Chart& g, const StepwiseResult& r, const ReportContext& c) {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      g.W, g.H);
  s += fmt::format(
      "<text x=\"{:.0f}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", g.left,
      xml_escape(fmt::format(
          "tok/s step by step: {}{} on profile {}",
          std::filesystem::path(c.model).filename().string(),
          c.draft.empty() ? ""
                          : " (draft " + std::filesystem::path(c.draft).filename().string() + ")",
          c.profile)));
  s += fmt::format(
      "<text x=\"{:.0f}\" y=\"42\" fill=\"#555\">{}</text>\n", g.left,
      xml_escape(fmt::format("median of {} interleaved runs per step; whiskers: min-max; "
                             "green/red: significant gain/loss, grey: within noise",
                             r.rounds)));
  for (int i = 0; i <= 5; ++i) {
    const double v = g.top_v * i / 5;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        g.left, g.left + g.plot_w, g.y(v), g.left - 6, g.y(v) + 4, v);
  }
  s += fmt::format(
      "<text transform=\"translate(20,{:.0f}) rotate(-90)\" text-anchor=\"middle\">tok/s</text>\n",
      g.top + g.plot_h / 2);
  s += fmt::format(
      "<text x=\"{:.0f}\" y=\"{:.0f}\" fill=\"#555\">{}</text>\n", g.left, g.H - 30,
      xml_escape("orange tick: roofline (read bandwidth on the CPUs used / bytes per token), "
                 "drawn when it fits the scale"));
  return s;
}

// "needs reboot: not measured" on two lines, split at the colon.
std::string svg_status(const Chart& g, double cx, const std::string& status) {
  const auto colon = status.find(": ");
  const std::string l1 = status.substr(0, colon == std::string::npos ? 28 : colon + 1);
  const std::string l2 = colon == std::string::npos ? "" : status.substr(colon + 2, 28);
  std::string s;
  for (const auto& [line, dy] : {std::pair{l1, 34.0}, std::pair{l2, 47.0}})
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#a60\" "
        "font-size=\"10\">{}</text>\n",
        cx, g.top + g.plot_h + dy, xml_escape(line));
  return s;
}

// One measured row: the bar from `from` to its median, the dashed connector
// from the previous bar's right edge, min-max whiskers, labels, roofline tick.
std::string svg_bar(const Chart& g, const Row& row, double cx, double from, double prev_right,
                    bool first) {
  const double x0 = cx - g.bar / 2, m = row.tok_s.median;
  std::string fill = "#4a78b5";
  if (row.vs_prev)
    fill = row.vs_prev->verdict != Verdict::significant ? "#9a9a9a"
           : row.delta_prev >= 0                        ? "#3a9a4a"
                                                        : "#c0392b";
  const double y_hi = g.y(std::max(from, m)), y_lo = g.y(std::min(from, m));
  std::string s = fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", x0,
      y_hi, g.bar, std::max(1.0, y_lo - y_hi), fill);
  if (!first)
    s += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\" "
        "stroke-dasharray=\"3,2\"/>\n",
        prev_right, x0, g.y(from), g.y(from));
  s += fmt::format(
      "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/>"
      "<line x1=\"{3:.1f}\" x2=\"{4:.1f}\" y1=\"{1:.1f}\" y2=\"{1:.1f}\" stroke=\"black\"/>"
      "<line x1=\"{3:.1f}\" x2=\"{4:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/>\n",
      cx, g.y(row.tok_s.min), g.y(row.tok_s.max), cx - 6, cx + 6);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.2f}</text>\n", cx,
                   g.y(row.tok_s.max) - 6, m);
  if (row.vs_prev)
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\" "
        "fill=\"#333\">{} ({})</text>\n",
        cx, g.top + g.plot_h + 34, pct(row.delta_prev), verdict_name(row.vs_prev->verdict));
  if (row.roofline_tok_s > 0 && row.roofline_tok_s <= g.top_v)
    s += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e67e22\" "
        "stroke-width=\"2\"/>\n",
        x0 - 4, x0 + g.bar + 4, g.y(row.roofline_tok_s), g.y(row.roofline_tok_s));
  return s;
}

}  // namespace

std::string to_svg(const StepwiseResult& r, const ReportContext& c) {
  const Chart g = chart_geometry(r);
  std::string s = svg_frame(g, r, c);
  double prev_median = 0, prev_right = g.left;
  bool first = true;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const auto& row = r.rows[i];
    const double cx = g.cx(static_cast<int>(i));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", cx,
                     g.top + g.plot_h + 18,
                     xml_escape(fmt::format("{} {}", row.ref.step, row.ref.name)));
    if (!row.measured()) {
      s += svg_status(g, cx, row.status());
      continue;
    }
    s += svg_bar(g, row, cx, first ? 0 : prev_median, prev_right, first);
    first = false;
    prev_median = row.tok_s.median;
    prev_right = cx + g.bar / 2;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace epyctune::bench
