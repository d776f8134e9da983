#include "engine/synth/mkmodel_deepseek2.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "engine/synth/gguf_writer.hpp"

namespace epyctune::engine {
namespace {

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

// "blk.N." of a layer tensor's name.
std::string layer_prefix(std::string_view name) {
  const auto dot = name.find('.', 4);
  return std::string(name.substr(0, dot + 1));
}

}  // namespace

// config.json of deepseek-ai/DeepSeek-V2-Lite and DeepSeek-V3 (R1 shares V3's).
bool deepseek2_preset(std::string_view name, ModelShape& s) {
  auto& d = s.ds;
  s.name = std::string(name);
  s.arch = "deepseek2";
  s.norm_eps = 1e-6f, s.rope_base = 10000.0f, s.ctx = 163840;
  d.kv_lora = 512, d.qk_nope = 128, d.qk_rope = 64, d.v_head = 128;
  d.yarn_factor = 40.0f, d.yarn_orig_ctx = 4096;
  if (name == "deepseek-v2-lite") {
    s.dim = 2048, s.layers = 27, s.heads = 16, s.ffn = 10944, s.vocab = 102400;
    s.experts = 64, s.experts_used = 6, s.expert_ffn = 1408;
    d.q_lora = 0, d.dense_lead = 1, d.shared = 2, d.weights_scale = 1.0f;
    d.yarn_log_mul = 0.1f * 0.707f;  // 0.1 * mscale_all_dim
  } else if (name == "deepseek-v3") {
    s.dim = 7168, s.layers = 61, s.heads = 128, s.ffn = 18432, s.vocab = 129280;
    s.experts = 256, s.experts_used = 8, s.expert_ffn = 2048;
    d.q_lora = 1536, d.dense_lead = 3, d.shared = 1, d.weights_scale = 2.5f;
    d.weights_norm = true, d.sigmoid = true, d.groups = 8, d.groups_used = 4;
    d.yarn_log_mul = 0.1f;
  } else {
    return false;
  }
  s.kv_heads = s.heads;
  return true;
}

std::string deepseek2_key_names() {
  return "q_lora, kv_lora, qk_nope, qk_rope, v_head, dense_lead, shared, expert_scale, "
         "expert_norm, gating, groups, groups_used, yarn_factor, yarn_orig_ctx, yarn_log_mul, "
         "legacy_kv_b";
}

bool set_deepseek2_key(ModelShape& s, std::string_view key, std::string_view val) {
  auto& d = s.ds;
  auto bad = [&] {
    throw std::invalid_argument(fmt::format("shape: {} = '{}' is not a valid value", key, val));
  };
  auto num = [&]<typename T>(T& out) {
    if constexpr (std::is_same_v<T, float>) {
      char* end = nullptr;
      const std::string v(val);
      out = std::strtof(v.c_str(), &end);
      if (v.empty() || *end != '\0') bad();
    } else {
      auto r = std::from_chars(val.data(), val.data() + val.size(), out);
      if (r.ec != std::errc() || r.ptr != val.data() + val.size()) bad();
    }
    return true;
  };
  auto flag = [&](bool& out) {
    if (val != "0" && val != "1" && val != "true" && val != "false") bad();
    out = val == "1" || val == "true";
    return true;
  };
  if (key == "q_lora") return num(d.q_lora);
  if (key == "kv_lora") return num(d.kv_lora);
  if (key == "qk_nope") return num(d.qk_nope);
  if (key == "qk_rope") return num(d.qk_rope);
  if (key == "v_head") return num(d.v_head);
  if (key == "dense_lead") return num(d.dense_lead);
  if (key == "shared") return num(d.shared);
  if (key == "expert_scale") return num(d.weights_scale);
  if (key == "expert_norm") return flag(d.weights_norm);
  if (key == "groups") return num(d.groups);
  if (key == "groups_used") return num(d.groups_used);
  if (key == "yarn_factor") return num(d.yarn_factor);
  if (key == "yarn_orig_ctx") return num(d.yarn_orig_ctx);
  if (key == "yarn_log_mul") return num(d.yarn_log_mul);
  if (key == "legacy_kv_b") return flag(d.legacy_kv_b);
  if (key == "gating") {
    if (val != "softmax" && val != "sigmoid") bad();
    d.sigmoid = val == "sigmoid";
    return true;
  }
  return false;
}

void validate_deepseek2(const ModelShape& s) {
  const auto& d = s.ds;
  auto bad = [&](const std::string& m) {
    throw std::invalid_argument(fmt::format("shape '{}': {}", s.name, m));
  };
  if (d.kv_lora <= 0 || d.kv_lora % 32 || d.qk_nope <= 0 || d.qk_nope % 32 || d.v_head <= 0 ||
      d.v_head % 32)
    bad(fmt::format(
        "kv_lora {}, qk_nope {} and v_head {} must be positive multiples of 32 (start from "
        "--shape deepseek-v2-lite or deepseek-v3)",
        d.kv_lora, d.qk_nope, d.v_head));
  if (d.qk_rope <= 0 || d.qk_rope % 2) bad(fmt::format("qk_rope {} must be even", d.qk_rope));
  if (d.q_lora < 0 || d.q_lora % 32)
    bad(fmt::format("q_lora {} must be 0 or a multiple of 32", d.q_lora));
  if (d.dense_lead < 0 || d.dense_lead > s.layers)
    bad(fmt::format("dense_lead {} must be in [0, layers = {}]", d.dense_lead, s.layers));
  if (d.shared < 0) bad(fmt::format("shared {} must be >= 0", d.shared));
  if (d.groups > 1 && (s.experts % d.groups || d.groups_used < 1 || d.groups_used >= d.groups ||
                       d.groups_used * (s.experts / d.groups) < s.experts_used))
    bad(fmt::format("groups {} / groups_used {} do not fit {} experts, {} used", d.groups,
                    d.groups_used, s.experts, s.experts_used));
}

void write_deepseek2_hparams(gguf::Writer& w, const ModelShape& s) {
  const auto& d = s.ds;
  const std::string a = "deepseek2.";
  // The converter's MLA form caches the latent: one KV head of
  // kv_lora + rope, the expanded heads in key_length_mla / value_length_mla.
  w.set_u32(a + "attention.head_count_kv", d.legacy_kv_b ? s.heads : 1);
  w.set_u32(a + "attention.key_length",
            d.legacy_kv_b ? d.qk_nope + d.qk_rope : d.kv_lora + d.qk_rope);
  w.set_u32(a + "attention.value_length", d.legacy_kv_b ? d.v_head : d.kv_lora);
  if (!d.legacy_kv_b) {
    w.set_u32(a + "attention.key_length_mla", d.qk_nope + d.qk_rope);
    w.set_u32(a + "attention.value_length_mla", d.v_head);
  }
  w.set_u32(a + "rope.dimension_count", d.qk_rope);
  // llama.cpp reads q_lora_rank unless the layer count is a known "lite"
  // one: 0 means plain attn_q.
  w.set_u32(a + "attention.q_lora_rank", d.q_lora);
  w.set_u32(a + "attention.kv_lora_rank", d.kv_lora);
  w.set_u32(a + "leading_dense_block_count", d.dense_lead);
  w.set_u32(a + "expert_shared_count", d.shared);
  w.set_f32(a + "expert_weights_scale", d.weights_scale);
  w.set_bool(a + "expert_weights_norm", d.weights_norm);
  w.set_u32(a + "expert_gating_func", d.sigmoid ? 2 : 1);
  if (d.groups > 1) {
    w.set_u32(a + "expert_group_count", d.groups);
    w.set_u32(a + "expert_group_used_count", d.groups_used);
  }
  if (d.yarn_factor > 0) {
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", d.yarn_factor);
    w.set_u32(a + "rope.scaling.original_context_length", d.yarn_orig_ctx);
    w.set_f32(a + "rope.scaling.yarn_log_multiplier", d.yarn_log_mul);
  }
}

uint64_t deepseek2_params(const ModelShape& s) {
  const auto& d = s.ds;
  const uint64_t D = s.dim, H = s.heads, qk = d.qk_nope + d.qk_rope;
  uint64_t attn = d.q_lora > 0 ? D * d.q_lora + d.q_lora + uint64_t(d.q_lora) * H * qk : D * H * qk;
  attn +=
      D * (d.kv_lora + d.qk_rope) + d.kv_lora + uint64_t(d.kv_lora) * H * (d.qk_nope + d.v_head);
  attn += H * d.v_head * D + 2 * D;
  const uint64_t dense = 3 * D * s.ffn;
  const uint64_t moe =
      uint64_t(s.experts) * (3 * D * s.expert_ffn + D) + 3 * D * uint64_t(s.expert_ffn) * d.shared;
  const uint64_t layers = uint64_t(s.layers) * attn + uint64_t(d.dense_lead) * dense +
                          uint64_t(s.layers - d.dense_lead) * moe;
  return uint64_t(s.vocab) * D * (s.tied_output ? 1 : 2) + D + layers;
}

void deepseek2_layer_tensors(
    const ModelShape& s, int i,
    const std::function<void(std::string, int64_t, int64_t, int64_t)>& add) {
  const auto& d = s.ds;
  auto n = [i](const char* x) { return fmt::format("blk.{}.{}.weight", i, x); };
  const int64_t D = s.dim, H = s.heads, qk = d.qk_nope + d.qk_rope;
  add(n("attn_norm"), D, 1, 1);
  if (d.q_lora > 0) {
    add(n("attn_q_a"), D, d.q_lora, 1);
    add(n("attn_q_a_norm"), d.q_lora, 1, 1);
    add(n("attn_q_b"), d.q_lora, H * qk, 1);
  } else {
    add(n("attn_q"), D, H * qk, 1);
  }
  add(n("attn_kv_a_mqa"), D, d.kv_lora + d.qk_rope, 1);
  add(n("attn_kv_a_norm"), d.kv_lora, 1, 1);
  if (d.legacy_kv_b) {
    add(n("attn_kv_b"), d.kv_lora, H * (d.qk_nope + d.v_head), 1);
  } else {
    add(n("attn_k_b"), d.qk_nope, d.kv_lora, H);
    add(n("attn_v_b"), d.kv_lora, d.v_head, H);
  }
  add(n("attn_output"), H * d.v_head, D, 1);
  add(n("ffn_norm"), D, 1, 1);
  if (i < d.dense_lead) {
    add(n("ffn_gate"), D, s.ffn, 1);
    add(n("ffn_up"), D, s.ffn, 1);
    add(n("ffn_down"), s.ffn, D, 1);
    return;
  }
  const int64_t E = s.experts, F = s.expert_ffn;
  add(n("ffn_gate_inp"), D, E, 1);
  if (d.sigmoid) add(fmt::format("blk.{}.exp_probs_b.bias", i), E, 1, 1);
  add(n("ffn_gate_exps"), D, F, E);
  add(n("ffn_up_exps"), D, F, E);
  add(n("ffn_down_exps"), F, D, E);
  if (d.shared > 0) {
    add(n("ffn_gate_shexp"), D, F * d.shared, 1);
    add(n("ffn_up_shexp"), D, F * d.shared, 1);
    add(n("ffn_down_shexp"), F * d.shared, D, 1);
  }
}

TensorFiller deepseek2_filler(const ModelShape& s, TensorFiller base) {
  const int r = s.ds.kv_lora, nope = s.ds.qk_nope, vh = s.ds.v_head;
  return [=](std::string_view name, int64_t ne0, int64_t row0, int64_t n_rows, float* out) {
    if (ends_with(name, "attn_v_b.weight")) {
      // Row h * v_head + i is attn_kv_b's row h * (qk_nope + v_head) + qk_nope + i.
      const std::string kvb = layer_prefix(name) + "attn_kv_b.weight";
      for (int64_t k = 0; k < n_rows; ++k) {
        const int64_t row = row0 + k, h = row / vh, i = row % vh;
        base(kvb, r, h * (nope + vh) + nope + i, 1, out + k * ne0);
      }
      return;
    }
    if (ends_with(name, "attn_k_b.weight")) {
      // Row h * kv_lora + j, element c is attn_kv_b's row h * (qk_nope + v_head) + c, element j.
      const std::string kvb = layer_prefix(name) + "attn_kv_b.weight";
      std::vector<float> head(size_t(nope) * r);
      int64_t cur = -1;
      for (int64_t k = 0; k < n_rows; ++k) {
        const int64_t row = row0 + k, h = row / r, j = row % r;
        if (h != cur) {
          base(kvb, r, h * (nope + vh), nope, head.data());
          cur = h;
        }
        for (int c = 0; c < nope; ++c) out[k * ne0 + c] = head[size_t(c) * r + j];
      }
      return;
    }
    base(name, ne0, row0, n_rows, out);
    if (ends_with(name, "exp_probs_b.bias"))
      for (int64_t k = 0; k < ne0 * n_rows; ++k) out[k] *= 0.1f;
  };
}

}  // namespace epyctune::engine
