// mkmodel's deepseek2 (DeepSeek V2 / V3 / R1) part: presets, shape keys,
// metadata, tensors and weights. Internal to the synth library.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "engine/synth/mkmodel.hpp"

namespace epyctune::engine {
namespace gguf {
class Writer;
}

// "deepseek-v2-lite" or "deepseek-v3" into s (config.json's geometry); false
// for another name.
bool deepseek2_preset(std::string_view name, ModelShape& s);
// A deepseek2 shape key (q_lora, kv_lora, ...) into s; false when the key is
// not one of them. Throws std::invalid_argument for a bad value.
bool set_deepseek2_key(ModelShape& s, std::string_view key, std::string_view val);
std::string deepseek2_key_names();
void validate_deepseek2(const ModelShape& s);  // throws std::invalid_argument
// The deepseek2.* keys as llama.cpp's current converter writes them.
void write_deepseek2_hparams(gguf::Writer& w, const ModelShape& s);
uint64_t deepseek2_params(const ModelShape& s);
// Layer i's tensors: add(name, ne0, ne1, ne2).
void deepseek2_layer_tensors(
    const ModelShape& s, int i,
    const std::function<void(std::string, int64_t, int64_t, int64_t)>& add);
// The split attn_k_b / attn_v_b hold exactly the attn_kv_b that `base` gives
// (as the converter splits it), so a split file and a legacy one are the
// same model; exp_probs_b is kept small beside the sigmoid probabilities.
TensorFiller deepseek2_filler(const ModelShape& s, TensorFiller base);

}  // namespace epyctune::engine
