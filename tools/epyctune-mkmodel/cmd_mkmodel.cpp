// `epyctune-mkmodel mkmodel`: synthetic llama GGUF models with seeded weights,
// and with --pair-of a draft for an existing target at a chosen agreement.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/epyctune-engine/progress.hpp"
#include "engine/gguf/gguf.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/synth/draft_pair.hpp"
#include "engine/synth/margins.hpp"
#include "engine/synth/mkmodel.hpp"
#include "tools/epyctune-mkmodel/commands.hpp"

namespace epyctune::mkmodel_tool {
namespace {

using engine_cli::ProgressLine;

namespace eng = epyctune::engine;

struct MkmodelArgs {
  std::string out, shape = "tiny", quant = "q4_0", vocab, pair_of, cpus, arch;
  uint64_t seed = 1;
  double agreement = -1.0;
  double residual_decay = 1.0;
  double attention_scale = 1.0;
  int draft_layers = 0, calib_seqs = 16, calib_steps = 32;
  int threads = 0;
  bool json = false;
  bool fast_quant = false;
  bool pard = false;
  eng::MarginOptions margins;
  double margin = 0.0;
  std::vector<std::string> margin_prompts;
};

// --margin: the seeded model with planted routing and a head corrected until
// every greedy step on the prompts wins by the margin (margins.hpp).
int write_with_margins(const MkmodelArgs& a, const eng::ModelShape& shape, eng::WriteOptions wo) {
  eng::MarginOptions mo = a.margins;
  mo.token_margin = a.margin;
  if (!a.margin_prompts.empty()) mo.prompts = a.margin_prompts;
  wo.progress = nullptr;
  eng::runtime::ThreadPool pool(eng::runtime::first_cpus(a.threads), false);
  const eng::MarginReport r = eng::write_margin_model(a.out, shape, wo, mo, pool);
  const nlohmann::json j = {
      {"path", a.out},
      {"shape", a.shape},
      {"arch", shape.arch},
      {"quant", a.quant},
      {"seed", a.seed},
      {"margin", a.margin},
      {"logit_std", r.logit_std},
      {"min_token_gap", r.min_token_gap},
      {"min_relative_gap", r.min_relative_gap()},
      {"min_router_gap",
       std::isinf(r.min_router_gap) ? nlohmann::json(nullptr) : nlohmann::json(r.min_router_gap)},
      {"planted_router_gap", r.planted_router_gap},
      {"rounds", r.rounds},
      {"rows_changed", r.rows_changed},
      {"reached", r.reached}};
  if (a.json)
    std::cout << j.dump(2) << "\n";
  else {
    const std::string routing = std::isinf(r.min_router_gap)
                                    ? std::string("no routing")
                                    : fmt::format("min router gap {:.3f} (planted {:.1f})",
                                                  r.min_router_gap, r.planted_router_gap);
    std::fprintf(stderr,
                 "[mkmodel] wrote %s: %s, %s; min top-1 gap %.3f = %.3f x logit std (asked "
                 "%.3f)%s, %s, %d rounds, %d head rows rewritten\n",
                 a.out.c_str(), a.shape.c_str(), a.quant.c_str(), r.min_token_gap,
                 r.min_relative_gap(), a.margin, r.reached ? "" : " NOT REACHED", routing.c_str(),
                 r.rounds, r.rows_changed);
  }
  return r.reached ? 0 : 3;
}

int run_plain(const MkmodelArgs& a) {
  // --arch as the shape's last override, so the architecture's defaults apply.
  eng::ModelShape shape = eng::parse_shape(a.arch.empty() ? a.shape : a.shape + ",arch=" + a.arch);
  eng::WriteOptions wo;
  wo.quant = a.quant;
  wo.fast_quant = a.fast_quant;
  wo.seed = a.seed;
  wo.threads = a.threads;
  if (!a.vocab.empty()) {
    // The vocabulary fixes the embedding's row count.
    auto f = eng::gguf::File::open(a.vocab);
    const auto* toks = f->get_array("tokenizer.ggml.tokens");
    if (!toks)
      throw std::invalid_argument("--vocab " + a.vocab + ": no tokenizer.ggml.tokens array");
    shape.vocab = static_cast<int>(toks->items.size());
    wo.vocab.copy_from = a.vocab;
  }
  eng::validate_shape(shape);
  if (a.pard)  // the last id as the mask: the weights are not trained for it
    wo.extra_u32.emplace_back("pard.mask_token_id", static_cast<uint32_t>(shape.vocab - 1));
  if (!(a.residual_decay > 0.0 && a.residual_decay <= 1.0))
    throw std::invalid_argument("--residual-decay: must be in (0, 1]");
  if (!(a.attention_scale > 0.0 && a.attention_scale <= 1.0))
    throw std::invalid_argument("--attention-scale: must be in (0, 1]");
  if (a.residual_decay < 1.0 || a.attention_scale < 1.0) {
    // Layer l writes into the residual stream through attn_output and
    // ffn_down; scaling both by R^l makes deep layers refinements of what the
    // first ones computed, as in trained models, so a draft made of the first
    // layers (--pair-of) can agree with the target often. A small attention
    // scale makes the next token depend mostly on the current one, so the
    // model re-emits a continuation it already wrote wherever the context
    // returns to that token: the text reuse of code editing (bench/spec_lookup.py).
    auto base = eng::seeded_filler(a.seed, shape);
    const double r = a.residual_decay, att = a.attention_scale;
    wo.filler = [base, r, att](std::string_view name, int64_t ne0, int64_t row0, int64_t n,
                               float* out) {
      base(name, ne0, row0, n, out);
      if (name.rfind("blk.", 0) != 0) return;
      const bool attn = name.ends_with(".attn_output.weight");
      if (!attn && !name.ends_with(".ffn_down.weight")) return;
      const int layer = std::stoi(std::string(name.substr(4)));
      const float s = static_cast<float>(std::pow(r, layer) * (attn ? att : 1.0));
      if (s == 1.0f) return;
      for (int64_t i = 0; i < ne0 * n; ++i) out[i] *= s;
    };
  }
  ProgressLine line("mkmodel");
  if (line.enabled())
    wo.progress = [&](std::string_view tensor, int index, int count) {
      line.update(tensor, static_cast<uint64_t>(index), static_cast<uint64_t>(count), "tensors");
    };
  if (a.margin > 0.0) {
    line.finish();
    return write_with_margins(a, shape, wo);
  }
  eng::write_model(a.out, shape, wo);
  line.finish();
  if (a.json) {
    std::cout
        << nlohmann::json{{"path", a.out},    {"shape", a.shape},     {"arch", shape.arch},
                          {"quant", a.quant}, {"seed", a.seed},       {"layers", shape.layers},
                          {"dim", shape.dim}, {"vocab", shape.vocab}, {"params", shape.n_params()}}
               .dump(2)
        << "\n";
  } else {
    std::fprintf(stderr, "[mkmodel] wrote %s: %s, %s, %d layers, dim %d, vocab %d, %.1fM params\n",
                 a.out.c_str(), a.shape.c_str(), a.quant.c_str(), shape.layers, shape.dim,
                 shape.vocab, double(shape.n_params()) / 1e6);
  }
  return 0;
}

int run_pair(const MkmodelArgs& a) {
  if (a.agreement < 0.0) throw std::invalid_argument("--pair-of needs --agreement A (0 < A <= 1)");
  eng::runtime::ThreadPool pool(a.cpus.empty() ? eng::runtime::first_cpus(a.threads)
                                               : eng::runtime::parse_cpus(a.cpus));
  eng::PairOptions po;
  po.agreement = a.agreement;
  po.seed = a.seed;
  po.draft_layers = a.draft_layers;
  po.sequences = a.calib_seqs;
  po.steps = a.calib_steps;
  po.pard = a.pard;
  po.log = [](const std::string& s) {
    std::fprintf(stderr, "[mkmodel --pair-of] %s\n", s.c_str());
  };
  const eng::PairReport r = eng::write_draft_pair(a.pair_of, a.out, po, pool);
  nlohmann::json j = {{"path", a.out},
                      {"target", a.pair_of},
                      {"agreement_requested", a.agreement},
                      {"agreement_measured", r.holdout_agreement},
                      {"agreement_samples", r.holdout_samples},
                      {"agreement_calibration", r.calibration_agreement},
                      {"copy_agreement", r.copy_agreement},
                      {"noise_scale", r.noise_scale},
                      {"target_layers", r.target_layers},
                      {"draft_layers", r.draft_layers},
                      {"target_params", r.target_params},
                      {"draft_params", r.draft_params},
                      {"drafts_measured", r.iterations},
                      {"reached", r.reached},
                      {"note", r.note}};
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::fprintf(stderr,
                 "[mkmodel] wrote draft %s: %d of %d layers, head noise %.4f; agreement %.3f on "
                 "%d held-out positions (asked %.3f)%s%s\n",
                 a.out.c_str(), r.draft_layers, r.target_layers, r.noise_scale, r.holdout_agreement,
                 r.holdout_samples, a.agreement, r.reached ? "" : " NOT REACHED: ", r.note.c_str());
  }
  return r.reached ? 0 : 3;
}

}  // namespace

void add_mkmodel_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MkmodelArgs>();
  auto* cmd = app.add_subcommand(
      "mkmodel", "Write a synthetic llama GGUF model, or a draft paired to an existing target");
  cmd->add_option("out", args->out, "Output GGUF path")->required();
  cmd->add_option("--shape", args->shape,
                  fmt::format("{}, then ,key=value overrides (layers=2,vocab=8192,..)",
                              fmt::join(eng::shape_presets(), " | ")))
      ->capture_default_str();
  cmd->add_option("--arch", args->arch,
                  "llama | qwen2 | qwen3 | qwen3moe | deepseek2 | gpt-oss (default: the shape's)");
  cmd->add_option("--quant", args->quant, fmt::format("{}", fmt::join(eng::quant_names(), " ")))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Weight seed")->capture_default_str();
  cmd->add_flag("--fast-quant", args->fast_quant,
                "Q4_K scales by min-max instead of ggml's search (large models in minutes)");
  cmd->add_option("--vocab", args->vocab, "Copy the tokenizer of this GGUF file");
  cmd->add_option("--attention-scale", args->attention_scale,
                  "Scale every layer's attention output by S (S < 1: the next token depends "
                  "mostly on the current one, and text repeats)");
  cmd->add_option("--residual-decay", args->residual_decay,
                  "Scale layer l's residual writes by R^l (R < 1: deep layers refine)")
      ->capture_default_str();
  cmd->add_option("--margin", args->margin,
                  "Plant greedy margins: every step on the margin prompts wins by G x the logits' "
                  "std; MoE routing gets a planted top-k gap (untied head)");
  cmd->add_option("--margin-prompt", args->margin_prompts,
                  "Prompt to plant margins for (repeatable; default \"The quick brown fox\")");
  cmd->add_option("--margin-steps", args->margins.steps, "Greedy steps per margin prompt")
      ->capture_default_str();
  cmd->add_option("--router-gap", args->margins.router_gap,
                  "Planted router logit gap between a token's top-k experts and the rest")
      ->capture_default_str();
  cmd->add_option("--pair-of", args->pair_of, "Write a draft for this target instead");
  cmd->add_option("--agreement", args->agreement, "Greedy agreement the draft should reach");
  cmd->add_flag(
      "--pard", args->pard,
      "Mark the model a PARD-style parallel draft (mask token = last id, in its metadata)");
  cmd->add_option("--draft-layers", args->draft_layers, "Draft layers (0 = chosen to reach A)");
  cmd->add_option("--calib-seqs", args->calib_seqs, "Greedy target trajectories to calibrate on")
      ->capture_default_str();
  cmd->add_option("--calib-steps", args->calib_steps, "Steps per trajectory")
      ->capture_default_str();
  auto* th = cmd->add_option("-t,--threads", args->threads,
                             "Threads: the first N allowed CPUs (default: all allowed)");
  cmd->add_option("--cpus", args->cpus,
                  "CPUs for --pair-of calibration runs (default: all allowed)")
      ->excludes(th);
  cmd->add_flag("--json", args->json, "Print a JSON report");
  cmd->callback([args, &exit_code] {
    try {
      exit_code = args->pair_of.empty() ? run_plain(*args) : run_pair(*args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "epyctune-mkmodel mkmodel: error: %s\n", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace epyctune::mkmodel_tool
