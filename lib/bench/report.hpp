// The step-by-step table (text), its JSON (docs/json/bench.md) and the
// waterfall chart (SVG) of a StepwiseResult.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/stepwise.hpp"

namespace epyctune::bench {

struct ReportContext {
  std::string profile, model, draft, host;
  int tokens = 0, repeat = 0;
  std::string expectations_source, expectations_model;  // the profile's, if any
  std::map<std::string, double> expectations;           // all the profile's figures
  std::vector<std::string> notes;                       // CPU mapping, sysroot
  nlohmann::json launch_plan;                           // the tuner's plan (null: none)
};

std::string to_text(const StepwiseResult& r, const ReportContext& c);
nlohmann::json to_json(const StepwiseResult& r, const ReportContext& c);
// Waterfall: one bar per measured row from the previous row's median to this
// row's (stock from zero), whiskers at each row's min and max; rows that were
// not measured keep their slot with their status written in it.
std::string to_svg(const StepwiseResult& r, const ReportContext& c);

}  // namespace epyctune::bench
