#include "engine/synth/draft_pair.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/rng.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/synth/gguf_writer.hpp"
#include "engine/synth/mkmodel.hpp"

namespace epyctune::engine {
namespace {

// Greedy target trajectories: tokens[s] is what the draft is fed (prompt plus
// the target's picks but the last), want[s] the target's pick at each
// predicted position from the end of the prompt on.
struct Trajectories {
  int prompt_len = 4;
  std::vector<std::vector<int32_t>> tokens, want;
  int samples() const {
    int n = 0;
    for (const auto& w : want) n += static_cast<int>(w.size());
    return n;
  }
};

Trajectories sample_trajectories(LlamaModel& target, int n_seq, int steps, uint64_t seed) {
  Trajectories tr;
  const int nv = target.n_vocab();
  const int steps_fit = std::min(steps, target.n_ctx() - tr.prompt_len);
  if (steps_fit < 1) throw std::runtime_error("target context too short to measure agreement");
  sampling::Xoshiro256 rng(seed);
  std::vector<float> row(static_cast<size_t>(nv));
  for (int s = 0; s < n_seq; ++s) {
    std::vector<int32_t> toks;
    for (int i = 0; i < tr.prompt_len; ++i)
      toks.push_back(1 + static_cast<int32_t>(rng.next() % static_cast<uint64_t>(nv - 1)));
    std::vector<int32_t> want;
    target.truncate(0);
    target.forward_last(toks, row.data());
    int32_t t = sampling::argmax(row);
    want.push_back(t);
    for (int i = 1; i < steps_fit; ++i) {
      toks.push_back(t);
      target.forward(std::span<const int32_t>(&t, 1), row.data());
      t = sampling::argmax(row);
      want.push_back(t);
    }
    tr.tokens.push_back(std::move(toks));
    tr.want.push_back(std::move(want));
  }
  return tr;
}

// Fraction of positions where the draft's argmax equals the target's, with
// the draft fed the target's own context (one batched pass per trajectory).
double measure_agreement(LlamaModel& draft, const Trajectories& tr) {
  const int nv = draft.n_vocab();
  int agree = 0, total = 0;
  std::vector<float> logits;
  for (size_t s = 0; s < tr.tokens.size(); ++s) {
    const auto& toks = tr.tokens[s];
    logits.resize(toks.size() * static_cast<size_t>(nv));
    draft.truncate(0);
    draft.forward(toks, logits.data());
    for (size_t i = 0; i < tr.want[s].size(); ++i) {
      const size_t r = static_cast<size_t>(tr.prompt_len) - 1 + i;
      std::span<const float> row(logits.data() + r * static_cast<size_t>(nv),
                                 static_cast<size_t>(nv));
      agree += sampling::argmax(row) == tr.want[s][i];
      ++total;
    }
  }
  return total ? double(agree) / total : 0.0;
}

uint64_t name_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

// Rows of the draft's tensors, read from the target; the head gets noise.
TensorFiller copy_filler(const gguf::File& tf, bool target_tied, double noise, uint64_t seed) {
  return [&tf, target_tied, noise, seed](std::string_view name, int64_t ne0, int64_t row0,
                                         int64_t n_rows, float* out) {
    const bool head = name == "output.weight";
    const std::string src = head && target_tied ? "token_embd.weight" : std::string(name);
    const gguf::TensorInfo* ti = tf.tensor(src);
    if (!ti || ti->ne[0] != ne0 || row0 + n_rows > ti->n_rows())
      throw std::runtime_error(tf.path() + ": tensor '" + src +
                               "' missing or shaped unlike the draft expects");
    const size_t rb = row_size(ti->type, ne0);
    for (int64_t r = 0; r < n_rows; ++r) {
      float* o = out + r * ne0;
      kernels::dequantize_row(ti->type, ti->data + static_cast<size_t>(row0 + r) * rb, o, ne0);
      if (!head || noise <= 0.0) continue;
      double m = 0.0, m2 = 0.0;
      for (int64_t i = 0; i < ne0; ++i) {
        m += o[i];
        m2 += double(o[i]) * o[i];
      }
      m /= double(ne0);
      const double sd = std::sqrt(std::max(0.0, m2 / double(ne0) - m * m));
      sampling::Xoshiro256 rng(seed ^ name_hash(name) ^
                               (static_cast<uint64_t>(row0 + r) * 0x9e3779b97f4a7c15ULL));
      for (int64_t i = 0; i < ne0; ++i) {
        // Irwin-Hall of 4 uniforms: mean 2, variance 1/3 -> standardised.
        const double g =
            (rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform() - 2.0) * std::sqrt(3.0);
        o[i] += static_cast<float>(noise * sd * g);
      }
    }
  };
}

std::string quant_of(const gguf::File& f) {
  bool q4k = false, q6k = false;
  for (const auto& t : f.tensors()) {
    q4k |= t.type == GgmlType::Q4_K;
    q6k |= t.type == GgmlType::Q6_K;
  }
  if (q4k && q6k) return "q4_k_m";
  const gguf::TensorInfo* t = f.tensor("blk.0.ffn_gate.weight");
  if (!t) throw std::runtime_error(f.path() + ": no tensor 'blk.0.ffn_gate.weight' (not llama?)");
  return std::string(traits(t->type).name);
}

}  // namespace

PairReport write_draft_pair(const std::filesystem::path& target_path,
                            const std::filesystem::path& out, const PairOptions& o,
                            runtime::ThreadPool& pool) {
  if (!(o.agreement > 0.0 && o.agreement <= 1.0))
    throw std::invalid_argument("--agreement: must be in (0, 1]");
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  auto target = LlamaModel::load(target_path, pool);
  const gguf::File& tf = target->file();
  const LlamaConfig& c = target->config();
  if (c.rope_scaling != RopeScaling::none || c.n_rot != c.head_dim || c.n_expert > 0)
    throw std::runtime_error(tf.path() +
                             ": unsupported: target uses rope scaling, partial rotary "
                             "dimensions or experts, which mkmodel shapes cannot express");
  if (c.n_layers < 2)
    throw std::runtime_error(tf.path() + ": target has " + std::to_string(c.n_layers) +
                             " layer(s); a smaller draft needs at least 2");
  const bool tied = tf.tensor("output.weight") == nullptr;

  ModelShape shape;
  shape.name = "draft";
  shape.arch = c.arch_name;
  if (c.head_dim * c.n_heads != c.dim) shape.head_dim_override = c.head_dim;
  shape.dim = c.dim;
  shape.heads = c.n_heads;
  shape.kv_heads = c.n_kv_heads;
  shape.ffn = c.ffn_dim;
  shape.vocab = c.n_vocab;
  shape.ctx = c.n_ctx;
  shape.rope_base = c.rope_freq_base;
  shape.norm_eps = c.norm_eps;
  shape.tied_output = false;  // the head carries the noise; the embedding stays exact

  WriteOptions wo;
  wo.quant = quant_of(tf);
  wo.seed = o.seed;
  wo.vocab.copy_from = target_path;
  if (o.pard) wo.extra_u32.emplace_back("pard.mask_token_id", static_cast<uint32_t>(c.n_vocab - 1));
  wo.general_name = "epyctune-draft-of-" + (c.name.empty() ? std::string("target") : c.name);

  PairReport rep;
  rep.target_layers = c.n_layers;
  log("sampling greedy target trajectories");
  const Trajectories calib = sample_trajectories(*target, o.sequences, o.steps, o.seed);
  const Trajectories hold =
      sample_trajectories(*target, std::max(1, o.sequences / 2), o.steps, o.seed ^ 0xabcdefULL);

  auto try_draft = [&](int layers, double noise) {
    shape.layers = layers;
    wo.filler = copy_filler(tf, tied, noise, o.seed);
    write_model(out, shape, wo);
    auto d = LlamaModel::load(out, pool);
    const double a = measure_agreement(*d, calib);
    ++rep.iterations;
    log("layers " + std::to_string(layers) + ", noise " + std::to_string(noise) + ": agreement " +
        std::to_string(a));
    return a;
  };

  int layers =
      o.draft_layers > 0 ? std::min(o.draft_layers, c.n_layers - 1) : std::max(1, c.n_layers / 8);
  double a0 = try_draft(layers, 0.0);
  while (a0 < o.agreement - o.tolerance && layers < c.n_layers - 1 && o.draft_layers <= 0) {
    ++layers;  // the smallest copy that is good enough: the draft stays cheap
    a0 = try_draft(layers, 0.0);
  }
  rep.draft_layers = layers;
  rep.copy_agreement = a0;
  double best_s = 0.0, best_a = a0;
  if (a0 > o.agreement + o.tolerance) {
    double lo = 0.0, hi = 0.25, a_hi = 1.0;
    while (hi < 64.0 && (a_hi = try_draft(layers, hi)) > o.agreement) {
      if (std::abs(a_hi - o.agreement) < std::abs(best_a - o.agreement)) best_s = hi, best_a = a_hi;
      lo = hi;
      hi *= 2.0;
    }
    if (std::abs(a_hi - o.agreement) < std::abs(best_a - o.agreement)) best_s = hi, best_a = a_hi;
    for (int it = 0; it < o.max_iterations && std::abs(best_a - o.agreement) > o.tolerance; ++it) {
      const double mid = 0.5 * (lo + hi);
      const double a = try_draft(layers, mid);
      if (std::abs(a - o.agreement) < std::abs(best_a - o.agreement)) best_s = mid, best_a = a;
      (a > o.agreement ? lo : hi) = mid;
    }
  } else if (a0 < o.agreement - o.tolerance) {
    rep.note = "the " + std::to_string(layers) + "-layer copy alone agrees only " +
               std::to_string(a0) + " < " + std::to_string(o.agreement) +
               "; wrote it without noise (more layers would not make it much smaller than "
               "the target)";
  }
  // Leave the best draft on disk and measure it on trajectories it was not tuned on.
  shape.layers = layers;
  wo.filler = copy_filler(tf, tied, best_s, o.seed);
  write_model(out, shape, wo);
  auto d = LlamaModel::load(out, pool);
  rep.noise_scale = best_s;
  rep.calibration_agreement = measure_agreement(*d, calib);
  rep.holdout_agreement = measure_agreement(*d, hold);
  rep.holdout_samples = hold.samples();
  rep.reached = std::abs(rep.holdout_agreement - o.agreement) <= 0.05;
  ModelShape ts = shape;
  ts.layers = c.n_layers;
  ts.tied_output = tied;
  rep.target_params = ts.n_params();
  rep.draft_params = shape.n_params();
  return rep;
}

}  // namespace epyctune::engine
