// bench's speculative mode (bench_spec.hpp). Every configuration decodes the
// same prompt once per repeat, in turn, so background load hits them alike;
// each speculative run must give exactly plain decoding's tokens (greedy).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/epyctune-engine/bench_spec.hpp"
#include "apps/epyctune-engine/engine_options.hpp"
#include "common/cpulist.hpp"
#include "common/stats.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/runtime/bandwidth.hpp"
#include "engine/serving/engine.hpp"
#include "engine/speculative/speculative.hpp"

namespace epyctune::engine_cli {
namespace {

namespace eng = epyctune::engine;
namespace spec = epyctune::engine::speculative;

struct Config {
  std::string name;  // "plain", "adaptive", "K=4"
  bool adaptive = false;
  int k = 0;
};

struct Runs {
  std::vector<double> tps;
  std::vector<double> predicted;  // per repeat, from that repeat's probed pass times
  spec::SpecStats last;           // of the last repeat (acceptance, K over time)
  spec::SpecStats sum;            // position counts and K histogram over all repeats
  std::map<int, int64_t> k_hist;
};

using common::median;

std::vector<Config> parse_configs(const std::vector<std::string>& spec_list, int& max_k) {
  std::vector<Config> out{{"plain", false, 0}};
  max_k = 1;
  for (const auto& s : spec_list) {
    if (s == "adaptive") {
      out.push_back({"adaptive", true, 16});
      max_k = std::max(max_k, 16);
      continue;
    }
    size_t used = 0;
    int k = -1;
    try {
      k = std::stoi(s, &used);
    } catch (const std::exception&) {
    }
    if (used != s.size() || k < 1 || k > 64)
      throw std::invalid_argument("--spec: '" + s + "': expected adaptive or a K from 1 to 64");
    out.push_back({"K=" + s, false, k});
    max_k = std::max(max_k, k);
  }
  return out;
}

// Conditional acceptance by position: accepted / reached.
std::vector<double> accept_by_pos(const spec::SpecStats& s) {
  std::vector<double> a;
  for (size_t i = 0; i < s.pos_tried.size() && s.pos_tried[i] > 0; ++i)
    a.push_back(double(s.pos_accepted[i]) / double(s.pos_tried[i]));
  return a;
}

// What the cost model predicts for the rounds a configuration ran: each
// round's expected tokens (from the measured acceptance by position) over
// its predicted time, against plain decoding's predicted single-token pass.
double predicted(const spec::CostModel& c, double plain_s, const std::map<int, int64_t>& k_hist,
                 const std::vector<double>& accept) {
  double tokens = 0, time = 0;
  for (const auto& [k, n] : k_hist) {
    tokens += double(n) * spec::expected_tokens(k, accept);
    time += double(n) * c.round_seconds(k);
  }
  return time > 0 ? tokens / time * plain_s : 1.0;
}

double predicted(const spec::CostModel& c, double plain_s, const Runs& r) {
  return predicted(c, plain_s, r.k_hist, accept_by_pos(r.sum));
}

double predicted(const spec::CostModel& c, double plain_s, const spec::SpecStats& st) {
  std::map<int, int64_t> hist;
  for (int16_t k : st.k_trace) ++hist[k];
  return predicted(c, plain_s, hist, accept_by_pos(st));
}

// The pass times probed again before each repeat. Where the memory
// bandwidth moves (a virtual machine, a busy socket), the memory-bound
// single-token pass and the compute-bound verify pass do not move together,
// so pass times from another moment misjudge what a round saves.
struct Probe {
  spec::CostModel cost;
  double plain_s = 0;
};

Probe probe(eng::serving::Engine& e, eng::serving::Engine* plain, int max_k) {
  Probe p{e.cost_model(), 0.0};
  p.cost.target = spec::measure_pass_times(e.target(), max_k + 1);
  if (e.draft()) {
    const bool parallel = p.cost.parallel_draft;
    const int n = spec::CostModel::draft_tokens_to_time(parallel, max_k);
    p.cost.set_draft_times(spec::measure_pass_times(*e.draft(), n), parallel);
  }
  p.plain_s = plain ? spec::measure_pass_times(plain->target(), 1).at(1) : p.cost.verify_seconds(0);
  return p;
}

// The best ratio a K up to max_k could reach if every proposal were
// accepted: what even a draft that always agrees is held to on this host by
// its own cost and by how the verify pass grows with K.
struct Ceiling {
  int k = 0;
  double ratio = 1.0;
};
Ceiling ceiling(const Probe& p, int max_k) {
  const spec::BestK b = spec::best_draft_k(p.cost, max_k, 1.0);
  const double ratio = b.tokens_per_s * p.plain_s;
  return ratio > 1.0 ? Ceiling{b.k, ratio} : Ceiling{};
}

// K over time, run-length coded: "4x3 8x12 0x40" (K x rounds).
std::string timeline(const std::vector<int16_t>& ks) {
  std::string out;
  for (size_t i = 0; i < ks.size();) {
    size_t j = i;
    while (j < ks.size() && ks[j] == ks[i]) ++j;
    out += (out.empty() ? "" : " ") + fmt::format("{}x{}", ks[i], j - i);
    i = j;
  }
  return out;
}

void accumulate(Runs& r, const spec::SpecStats& st, const Probe& p) {
  r.tps.push_back(st.tokens_per_second());
  r.predicted.push_back(predicted(p.cost, p.plain_s, st));
  r.last = st;
  if (r.sum.pos_tried.size() < st.pos_tried.size()) {
    r.sum.pos_tried.resize(st.pos_tried.size());
    r.sum.pos_accepted.resize(st.pos_accepted.size());
  }
  for (size_t i = 0; i < st.pos_tried.size(); ++i) {
    r.sum.pos_tried[i] += st.pos_tried[i];
    r.sum.pos_accepted[i] += st.pos_accepted[i];
  }
  r.sum.drafted += st.drafted;
  r.sum.accepted += st.accepted;
  r.sum.draft_passes += st.draft_passes;
  r.sum.target_passes += st.target_passes;
  r.sum.draft_s += st.draft_s;
  r.sum.verify_s += st.verify_s;
  r.sum.wait_s += st.wait_s;
  r.sum.generate_s += st.generate_s;
  for (int16_t k : st.k_trace) ++r.k_hist[k];
}

std::vector<int32_t> run_once(eng::serving::Engine& e, eng::CausalLM& target, const Config& c,
                              const std::vector<int32_t>& prompt, const SpecBenchOptions& o,
                              spec::SpecStats& st) {
  spec::SpecOptions so;
  so.draft_len = c.k;
  so.adaptive = c.adaptive;
  so.cost = e.cost_model();
  so.lookup = {c.k > 0 ? o.lookup : 0, 1};
  so.mode = e.mode();
  so.null_logits_ok = true;
  so.max_batch = 64;
  if (c.k == 0) so.mode = spec::SpecMode::shared;
  spec::Generator g(target, c.k > 0 ? e.drafting_model() : nullptr, {}, so);
  auto out = g.generate(prompt, o.n_predict);
  st = g.stats();
  return out;
}

// The cost model's single-token pass of the plain baseline: the verify
// pass at K=0, or (partitioned) the plain engine's target on all the CPUs.
double plain_pass_seconds(eng::serving::Engine& e, eng::serving::Engine* plain,
                          const SpecBenchOptions& o) {
  if (!plain) return e.cost_model().verify_seconds(0);
  const std::string key =
      spec::cost_cache_key(o.model, common::format_cpulist(plain->target().pool().cpus()),
                           eng::kernels::isa_name(eng::kernels::active_isa()));
  return spec::cached_pass_times(plain->target(), key, 1, o.cost_cache).at(1);
}

struct Roofline {
  double gbps = 0, bytes_per_token = 0;
  double tps() const { return bytes_per_token > 0 ? gbps * 1e9 / bytes_per_token : 0; }
};

Roofline measure_roofline(eng::serving::Engine& e, const SpecBenchOptions& o) {
  Roofline r;
  r.bytes_per_token = double(e.target().weight_bytes_per_pass(1));
  r.gbps = eng::runtime::measure_read_bandwidth(e.target().pool(), size_t(o.bw_mib) << 20, 5)
               .median_gbps;
  return r;
}

// The median over repeats of each repeat's tok/s over plain decoding's in the
// same repeat. A virtual machine's bandwidth can move 1.5x between repeats,
// and both configurations of one repeat ran within seconds of each other,
// so pairing them cancels what a ratio of the two medians would keep.
double paired_ratio(const Runs& r, const Runs& plain) {
  std::vector<double> q;
  for (size_t i = 0; i < r.tps.size() && i < plain.tps.size(); ++i)
    if (plain.tps[i] > 0) q.push_back(r.tps[i] / plain.tps[i]);
  return q.empty() ? 0.0 : median(q);
}

nlohmann::json config_json(const Config& c, const Runs& r, const Runs& plain,
                           const spec::CostModel& cost, double plain_s) {
  const double tps = median(r.tps), plain_tps = median(plain.tps);
  nlohmann::json j = {{"name", c.name},
                      {"adaptive", c.adaptive},
                      {"k", c.k},
                      {"tokens_per_s", {{"median", tps}, {"samples", r.tps}}},
                      {"ratio_to_plain", paired_ratio(r, plain)},
                      {"ratio_of_medians", plain_tps > 0 ? tps / plain_tps : 0.0}};
  if (c.k == 0) return j;
  std::map<std::string, int64_t> hist;
  for (const auto& [k, n] : r.k_hist) hist[std::to_string(k)] = n;
  j["acceptance"] = r.sum.drafted ? double(r.sum.accepted) / double(r.sum.drafted) : 0.0;
  j["acceptance_by_position"] = accept_by_pos(r.sum);
  j["k_histogram"] = hist;
  j["k_timeline_last_run"] = timeline(r.last.k_trace);
  j["predicted_ratio"] = median(r.predicted);
  j["predicted_per_repeat"] = r.predicted;
  j["predicted_from_cached_times"] = predicted(cost, plain_s, r);
  // Where the time went, beside what the cost model assumed for it
  // (draft_s per pass; the target's pass times by tokens per pass).
  const auto& t = r.sum;
  j["measured"] = {
      {"draft_s_per_pass", t.draft_passes ? t.draft_s / double(t.draft_passes) : 0.0},
      {"verify_s_per_round", t.target_passes ? t.verify_s / double(t.target_passes) : 0.0},
      {"wait_s_per_round", t.target_passes ? t.wait_s / double(t.target_passes) : 0.0},
      {"rounds", t.target_passes},
      {"draft_passes", t.draft_passes},
      {"generate_s", t.generate_s}};
  return j;
}

void print_table(const std::vector<Config>& cfgs, const std::vector<Runs>& runs,
                 const spec::CostModel& cost, double plain_s) {
  const double plain = median(runs[0].tps);
  fmt::print("{:<10} {:>9} {:>8} {:>10} {:>7} {:>7}  {}\n", "config", "tok/s", "x plain",
             "predicted", "cached", "accept", "acceptance by position 1..8");
  for (size_t i = 0; i < cfgs.size(); ++i) {
    const auto& r = runs[i];
    const double tps = median(r.tps);
    if (cfgs[i].k == 0) {
      fmt::print("{:<10} {:>9.2f} {:>8.2f} {:>10.2f} {:>7.2f}\n", cfgs[i].name, tps, 1.0, 1.0,
                 1.0 / plain_s / plain);
      continue;
    }
    std::string pos;
    const auto a = accept_by_pos(r.sum);
    for (size_t p = 0; p < std::min<size_t>(a.size(), 8); ++p) pos += fmt::format("{:.2f} ", a[p]);
    fmt::print("{:<10} {:>9.2f} {:>8.2f} {:>10.2f} {:>7.2f} {:>7.2f}  {}\n", cfgs[i].name, tps,
               paired_ratio(r, runs[0]), median(r.predicted), predicted(cost, plain_s, r),
               r.sum.drafted ? double(r.sum.accepted) / double(r.sum.drafted) : 0.0, pos);
  }
  for (size_t i = 0; i < cfgs.size(); ++i) {
    if (!cfgs[i].adaptive) continue;
    std::string hist;
    for (const auto& [k, n] : runs[i].k_hist) hist += fmt::format("K={}:{} ", k, n);
    fmt::print("{} K histogram (rounds): {}\n", cfgs[i].name, hist);
    fmt::print("{} K over time, last run (K x rounds): {}\n", cfgs[i].name,
               timeline(runs[i].last.k_trace));
  }
}

struct Report {
  const SpecBenchOptions& o;
  eng::serving::Engine& e;
  const std::vector<Config>& cfgs;
  const std::vector<Runs>& runs;
  const std::vector<Probe>& probes;
  Roofline roof;
  double plain_s;
  size_t prompt_tokens;
  int max_k;
};

std::vector<Ceiling> ceilings(const Report& r) {
  std::vector<Ceiling> out;
  for (const auto& p : r.probes) out.push_back(ceiling(p, r.max_k));
  return out;
}

nlohmann::json report_json(const Report& r) {
  const auto& cost = r.e.cost_model();
  const double plain = median(r.runs[0].tps);
  nlohmann::json j;
  j["model"] = r.o.model;
  j["draft"] = r.o.draft;
  j["mode"] = spec::spec_mode_name(r.e.mode());
  j["mode_reason"] = r.e.plan().reason;
  j["n_predict"] = r.o.n_predict;
  j["repeats"] = r.o.repeat;
  j["prompt_tokens"] = r.prompt_tokens;
  j["cost_model"] = {{"plain_pass_s", r.plain_s},
                     {"pass_n", cost.target.n},
                     {"pass_s", cost.target.s},
                     {"draft_s", cost.draft_s},
                     {"overlap", cost.overlap},
                     {"source", r.e.cost_note()},
                     {"parallel_draft", cost.parallel_draft},
                     {"draft_pass_n", cost.draft_pass.n},
                     {"draft_pass_s", cost.draft_pass.s}};
  j["probes"] = nlohmann::json::array();
  for (const auto& p : r.probes)
    j["probes"].push_back({{"plain_pass_s", p.plain_s},
                           {"pass_n", p.cost.target.n},
                           {"pass_s", p.cost.target.s},
                           {"draft_s", p.cost.draft_s}});
  std::vector<double> ceil_ratio;
  std::vector<int> ceil_k;
  for (const Ceiling& c : ceilings(r)) {
    ceil_ratio.push_back(c.ratio);
    ceil_k.push_back(c.k);
  }
  j["ceiling"] = {{"ratio", median(ceil_ratio)},
                  {"per_repeat", ceil_ratio},
                  {"k_per_repeat", ceil_k},
                  {"max_k", r.max_k}};
  j["roofline"] = {{"bandwidth_gbps", r.roof.gbps},
                   {"bytes_per_token", r.roof.bytes_per_token},
                   {"tokens_per_s", r.roof.tps()},
                   {"plain_fraction", r.roof.tps() > 0 ? plain / r.roof.tps() : 0.0}};
  j["configs"] = nlohmann::json::array();
  for (size_t i = 0; i < r.cfgs.size(); ++i)
    j["configs"].push_back(config_json(r.cfgs[i], r.runs[i], r.runs[0], cost, r.plain_s));
  return j;
}

void print_report(const Report& r) {
  const auto& cost = r.e.cost_model();
  const double plain = median(r.runs[0].tps);
  fmt::print("target {} / draft {}, mode {} ({}), {} tokens, {} interleaved repeats (medians)\n",
             r.o.model, r.o.draft.empty() ? "none" : r.o.draft, spec::spec_mode_name(r.e.mode()),
             r.e.plan().reason, r.o.n_predict, r.o.repeat);
  fmt::print("roofline {:.2f} tok/s = {:.2f} GB/s / {:.1f} MB per token; plain makes {:.0f}%\n",
             r.roof.tps(), r.roof.gbps, r.roof.bytes_per_token / 1e6,
             r.roof.tps() > 0 ? 100.0 * plain / r.roof.tps() : 0.0);
  fmt::print(
      "cost model: single-token pass {:.1f} ms, K=8 verify {:.2f}x it, draft {:.1f} ms per "
      "proposal ({})\n",
      cost.verify_seconds(0) * 1e3, cost.verify_seconds(8) / cost.verify_seconds(0),
      cost.draft_s * 1e3, r.e.cost_note());
  std::string probed;
  for (const auto& p : r.probes)
    probed +=
        fmt::format(" {:.1f}/{:.2f}x/{:.1f}", p.plain_s * 1e3,
                    p.cost.verify_seconds(8) / p.cost.verify_seconds(0), p.cost.draft_s * 1e3);
  fmt::print("probed before each repeat (single pass ms / K=8 verify / draft ms):{}\n", probed);
  std::vector<double> ceil_ratio;
  std::string ceil_each;
  for (const Ceiling& c : ceilings(r)) {
    ceil_ratio.push_back(c.ratio);
    ceil_each += fmt::format(" x{:.2f}@K={}", c.ratio, c.k);
  }
  fmt::print("ceiling, every proposal accepted (K <= {}): x{:.2f} (per repeat:{})\n", r.max_k,
             median(ceil_ratio), ceil_each);
  fmt::print(
      "predicted: median over repeats, from each repeat's probe; cached: from the cached times "
      "(for plain: the cached single-token rate over the measured one)\n");
  print_table(r.cfgs, r.runs, cost, r.plain_s);
}

}  // namespace

int run_spec_bench(const SpecBenchOptions& o) {
  try {
    int max_k = 1;
    const auto cfgs =
        parse_configs(o.spec.empty() ? std::vector<std::string>{"adaptive"} : o.spec, max_k);
    eng::serving::EngineConfig ec;
    ec.model = o.model;
    ec.draft = o.draft;
    ec.draft_threads = o.draft_threads;
    ec.threads = o.threads;
    if (!o.cpus.empty()) ec.cpus = cpus_flag(o.cpus);
    ec.spec_mode = o.spec_mode;
    ec.lookup = o.lookup;
    ec.draft_max = max_k;
    ec.draft_adaptive = true;  // measures (or reads) the cost model at load
    ec.cost_cache = o.cost_cache;
    eng::serving::Engine e(ec);
    e.load();
    const auto prompt = e.tokenizer().encode(o.prompt, true);
    if (prompt.empty()) throw std::invalid_argument("--prompt: encodes to no tokens");
    const Roofline roof = measure_roofline(e, o);
    // Partitioned, the target's pool holds only the verify CPUs: plain
    // decoding, the baseline, gets its own copy of the target on all of them.
    std::unique_ptr<eng::serving::Engine> plain_engine;
    if (e.partitioned()) {
      eng::serving::EngineConfig pc = ec;
      pc.draft.clear();
      pc.lookup = 0;
      pc.draft_max = 0;
      pc.spec_mode = spec::ModeRequest::automatic;
      plain_engine = std::make_unique<eng::serving::Engine>(pc);
      plain_engine->load();
    }
    const double plain_s = plain_pass_seconds(e, plain_engine.get(), o);

    std::vector<Runs> runs(cfgs.size());
    std::vector<int32_t> plain_tokens;
    std::vector<Probe> probes;
    for (int rep = 0; rep < o.repeat; ++rep) {
      probes.push_back(probe(e, plain_engine.get(), max_k));
      for (size_t i = 0; i < cfgs.size(); ++i) {
        spec::SpecStats st;
        auto& target = cfgs[i].k == 0 && plain_engine ? plain_engine->target() : e.target();
        const auto toks = run_once(e, target, cfgs[i], prompt, o, st);
        if (i == 0 && rep == 0) plain_tokens = toks;
        if (toks != plain_tokens)
          throw std::runtime_error(cfgs[i].name +
                                   ": speculative output differs from plain decoding");
        accumulate(runs[i], st, probes.back());
      }
    }
    const Report rep{o, e, cfgs, runs, probes, roof, plain_s, prompt.size(), max_k};
    if (o.json)
      std::cout << report_json(rep).dump(2) << '\n';
    else
      print_report(rep);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << error_text(e) << '\n';
    return 1;
  }
}

}  // namespace epyctune::engine_cli
