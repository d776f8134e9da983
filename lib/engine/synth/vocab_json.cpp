#include "engine/synth/vocab_json.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/tokenizer/tokenizer.hpp"

namespace epyctune::engine {
namespace {

using nlohmann::json;
using TokenType = Tokenizer::TokenType;

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read", p.string()));
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not JSON: {}", p.string(), e.what()));
  }
}

// Split patterns of the pre_tokenizer, in the order they apply.
std::vector<std::string> split_patterns(const json& pt) {
  std::vector<std::string> out;
  if (!pt.is_object()) return out;
  if (pt.value("type", "") == "Sequence" && pt.contains("pretokenizers")) {
    for (const auto& p : pt["pretokenizers"])
      for (auto& s : split_patterns(p)) out.push_back(std::move(s));
  } else if (pt.value("type", "") == "Split" && pt.contains("pattern")) {
    const auto& pat = pt["pattern"];
    if (pat.contains("Regex")) out.push_back(pat["Regex"].get<std::string>());
    if (pat.contains("String")) out.push_back(pat["String"].get<std::string>());
  }
  return out;
}

// A special token's text from tokenizer_config (a string or an AddedToken object).
std::string token_name(const json& cfg, const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return {};
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return {};
}

std::string chat_template_of(const json& cfg) {
  if (!cfg.contains("chat_template")) return {};
  const auto& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())  // named templates: the "default" one is the chat template
    for (const auto& e : t)
      if (e.value("name", "") == "default") return e.value("template", "");
  return {};
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
};

Vocab read_tokens(const json& model, const json& added, const std::string& file) {
  std::map<int64_t, std::pair<std::string, TokenType>> by_id;
  for (const auto& [text, id] : model["vocab"].items())
    by_id[id.get<int64_t>()] = {text, TokenType::Normal};
  for (const auto& a : added) {
    const auto type = a.value("special", false) ? TokenType::Control : TokenType::UserDefined;
    by_id[a["id"].get<int64_t>()] = {a["content"].get<std::string>(), type};
  }
  if (by_id.empty() || by_id.begin()->first < 0)
    throw std::runtime_error(fmt::format("{}: model.vocab is empty or has negative ids", file));
  Vocab v;
  const int64_t n = by_id.rbegin()->first + 1;
  v.tokens.reserve(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    const auto it = by_id.find(id);
    if (it == by_id.end()) {
      v.tokens.push_back(fmt::format("[PAD{}]", id));
      v.types.push_back(static_cast<int32_t>(TokenType::Unused));
    } else {
      v.tokens.push_back(it->second.first);
      v.types.push_back(static_cast<int32_t>(it->second.second));
    }
  }
  return v;
}

std::vector<std::string> read_merges(const json& model) {
  std::vector<std::string> out;
  out.reserve(model["merges"].size());
  for (const auto& m : model["merges"]) {
    if (m.is_string())
      out.push_back(m.get<std::string>());
    else  // newer tokenizer.json files list each merge as a [left, right] pair
      out.push_back(m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  }
  return out;
}

}  // namespace

std::string detect_pre_tokenizer(const std::vector<std::string>& p) {
  static const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string gpt4o =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (p.size() == 1 && p[0] == llama3) return "llama-bpe";
  if (p.size() == 1 && p[0] == qwen2) return "qwen2";
  if (p.size() == 1 && p[0] == gpt4o) return "gpt-4o";
  if (p.size() == 3 && p[0] == R"(\p{N}{1,3})" &&
      p[1] == "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+" &&
      p[2].starts_with(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|)"))
    return "deepseek-v3";
  return {};
}

void write_vocab_from_json(gguf::Writer& w, const VocabJsonOptions& o) {
  const std::string file = o.tokenizer_json.string();
  const json tj = read_json(o.tokenizer_json);
  std::filesystem::path cfg_path = o.config_json;
  if (cfg_path.empty()) {
    const auto beside = o.tokenizer_json.parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(beside)) cfg_path = beside;
  }
  const json cfg = cfg_path.empty() ? json::object() : read_json(cfg_path);
  const json& model = tj.at("model");
  if (model.value("type", "") != "BPE" || !model.contains("merges"))
    throw std::runtime_error(
        fmt::format("{}: model.type is '{}'; only byte-level BPE vocabularies are supported", file,
                    model.value("type", "")));

  std::string pre = o.pre;
  if (pre.empty()) pre = detect_pre_tokenizer(split_patterns(tj.value("pre_tokenizer", json())));
  if (pre.empty())
    throw std::runtime_error(fmt::format(
        "{}: the pre_tokenizer's pattern is none the engine recognises (llama-bpe, qwen2, "
        "deepseek-v3, gpt-4o); pass the tokenizer.ggml.pre name with --pre",
        file));

  Vocab v = read_tokens(model, tj.value("added_tokens", json::array()), file);
  auto id_of = [&](const std::string& text) -> int64_t {
    if (text.empty()) return -1;
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i] == text) return static_cast<int64_t>(i);
    return -1;
  };
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.merges", read_merges(model));
  const struct {
    const char* cfg_key;
    const char* gguf_key;
  } ids[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
             {"eos_token", "tokenizer.ggml.eos_token_id"},
             {"pad_token", "tokenizer.ggml.padding_token_id"},
             {"unk_token", "tokenizer.ggml.unknown_token_id"}};
  for (const auto& k : ids)
    if (const int64_t id = id_of(token_name(cfg, k.cfg_key)); id >= 0)
      w.set_u32(k.gguf_key, static_cast<uint32_t>(id));
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    w.set_bool("tokenizer.ggml.add_bos_token", cfg["add_bos_token"].get<bool>());
  if (const std::string t = chat_template_of(cfg); !t.empty())
    w.set_string("tokenizer.chat_template", t);
  w.set_string_array("tokenizer.ggml.tokens", std::move(v.tokens));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(v.types));
}

void write_vocab_gguf(const std::filesystem::path& out, const VocabJsonOptions& o) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  std::string name = o.name;
  if (name.empty()) name = o.tokenizer_json.parent_path().filename().string();
  w.set_string("general.name", name.empty() ? "vocab" : name);
  // llama.cpp reads these hyperparameters even for a vocabulary-only load;
  // the values are those of its own ggml-vocab-*.gguf files.
  w.set_u32("llama.context_length", 4096);
  w.set_u32("llama.embedding_length", 4096);
  w.set_u32("llama.block_count", 32);
  w.set_u32("llama.feed_forward_length", 11008);
  w.set_u32("llama.attention.head_count", 32);
  w.set_u32("llama.attention.head_count_kv", 32);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32("llama.rope.dimension_count", 128);
  write_vocab_from_json(w, o);
  w.begin(out);
  w.finish();
}

}  // namespace epyctune::engine
