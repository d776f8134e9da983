// Loading a tokenizer from GGUF metadata, and the parts of encode/decode that
// both models share (BOS, user-defined tokens, the SPM space prefix).
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"

namespace epyctune::engine {
namespace {

using gguf::FormatError;

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

[[noreturn]] void bad(const gguf::File& f, std::string_view key, const std::string& msg) {
  throw FormatError(fmt::format("{}: metadata '{}': {}", f.path(), key, msg));
}

const gguf::Array* array_of(const gguf::File& f, std::string_view key, size_t n,
                            std::initializer_list<gguf::ValueType> types) {
  const gguf::Array* a = f.get_array(key);
  if (!a) return nullptr;
  if (std::find(types.begin(), types.end(), a->elem_type) == types.end())
    bad(f, key,
        fmt::format("array element type {} is not the expected kind",
                    static_cast<uint32_t>(a->elem_type)));
  if (n != SIZE_MAX && a->items.size() != n)
    bad(f, key, fmt::format("has {} entries but tokenizer.ggml.tokens has {}", a->items.size(), n));
  return a;
}

int32_t token_id(const gguf::File& f, std::string_view key, int32_t dflt, size_t n_vocab) {
  const auto v = f.get_int(key);
  if (!v) return dflt < static_cast<int64_t>(n_vocab) ? dflt : -1;
  // llama.cpp writes -1 (as u32 0xFFFFFFFF in some converters) for "none".
  if (*v == -1 || *v == 0xFFFFFFFF) return -1;
  if (*v < 0 || *v >= static_cast<int64_t>(n_vocab))
    bad(f, key, fmt::format("token id {} is outside the vocabulary (0..{})", *v, n_vocab - 1));
  return static_cast<int32_t>(*v);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// The pre-tokenizer names llama.cpp's converter writes for each pattern.
struct PreName {
  std::string_view name;
  PreTokenizer pre;
};
constexpr PreName kPreNames[] = {
    {"default", PreTokenizer::Gpt2},
    {"gpt2", PreTokenizer::Gpt2},
    {"gpt-2", PreTokenizer::Gpt2},
    {"llama3", PreTokenizer::Llama3},
    {"llama-bpe", PreTokenizer::Llama3},
    {"llama-v3", PreTokenizer::Llama3},
    {"smaug-bpe", PreTokenizer::Llama3},
    {"qwen2", PreTokenizer::Qwen2},
    {"deepseek-v3", PreTokenizer::DeepseekV3},
    {"gpt-4o", PreTokenizer::Gpt4o},
};

void load_bpe(const gguf::File& f, Tokenizer::Impl& m) {
  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  const auto* hit = std::find_if(std::begin(kPreNames), std::end(kPreNames),
                                 [&](const PreName& p) { return p.name == pre; });
  if (hit == std::end(kPreNames)) {
    std::string names;
    for (const auto& p : kPreNames) names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
    bad(f, "tokenizer.ggml.pre",
        fmt::format("pre-tokenizer '{}' is not supported (supported: {})", pre, names));
  }
  m.pre = hit->pre;
  // llama.cpp skips the merges for a pre-token that is a whole token only
  // for Llama 3's vocabulary.
  m.ignore_merges = m.pre == PreTokenizer::Llama3;
  const gguf::Array* merges =
      array_of(f, "tokenizer.ggml.merges", SIZE_MAX, {gguf::ValueType::STRING});
  if (!merges) bad(f, "tokenizer.ggml.merges", "missing; a gpt2 tokenizer needs its merges");
  m.merges.reserve(merges->items.size());
  for (const auto& it : merges->items) m.merges.push_back(std::get<std::string>(it.v));
  m.merge_rank.reserve(m.merges.size());
  for (size_t i = 0; i < m.merges.size(); ++i) {
    const std::string& s = m.merges[i];
    const size_t sp = s.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= s.size())
      bad(f, "tokenizer.ggml.merges",
          fmt::format("merge #{} '{}' is not two symbols separated by a space", i, s));
    m.merge_rank.emplace(s, static_cast<int32_t>(i));  // first listing wins
  }
}

// BOS/EOS/EOT/EOM ids, the tokens matched verbatim in input, and the set of
// tokens that end generation.
void load_special(const gguf::File& f, Tokenizer::Impl& m, bool spm) {
  using TokenType = Tokenizer::TokenType;
  const size_t n = m.tokens.size();
  // Defaults are llama.cpp's for each model when the file does not say.
  m.bos = token_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : 11, n);
  m.eos = token_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : 11, n);
  m.unk = token_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  m.pad = token_id(f, "tokenizer.ggml.padding_token_id", -1, n);
  m.eot = token_id(f, "tokenizer.ggml.eot_token_id", -1, n);
  m.eom = token_id(f, "tokenizer.ggml.eom_token_id", -1, n);
  m.add_bos =
      f.get_bool("tokenizer.ggml.add_bos_token").value_or(spm || m.pre == PreTokenizer::Llama3);
  m.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  m.chat_template = f.get_string("tokenizer.chat_template").value_or("");

  // Harmony's markup must survive detokenization for its parser, so llama.cpp
  // treats it as user-defined whatever the file says.
  for (std::string_view s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (const int32_t id = m.find(s); id >= 0 && m.types[id] == TokenType::Control)
      m.types[id] = TokenType::UserDefined;

  for (size_t i = 0; i < n; ++i) {
    if (m.tokens[i].empty()) continue;
    if (m.types[i] == TokenType::UserDefined) m.user_defined.push_back(static_cast<int32_t>(i));
    if (m.types[i] == TokenType::UserDefined || m.types[i] == TokenType::Control)
      m.specials.push_back(static_cast<int32_t>(i));
  }
  auto longest_first = [&](int32_t a, int32_t b) {
    return m.tokens[a].size() > m.tokens[b].size();
  };
  std::stable_sort(m.user_defined.begin(), m.user_defined.end(), longest_first);
  std::stable_sort(m.specials.begin(), m.specials.end(), longest_first);

  // Without an eot key, llama.cpp takes the first end-of-turn token the vocabulary has.
  for (std::string_view s :
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>", "<｜end▁of▁sentence｜>"})
    if (const int32_t id = m.find(s); m.eot < 0 && id >= 0) m.eot = id;

  m.eog.assign(n, false);
  for (int32_t id : {m.eos, m.eot, m.eom})
    if (id >= 0) m.eog[id] = true;
  // Chat vocabularies end turns with these even when no key names them (llama.cpp's list).
  for (std::string_view s : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                             "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                             "<｜end▁of▁sentence｜>", "<end_of_utterance>"})
    if (const int32_t id = m.find(s);
        id >= 0 && (m.types[id] == TokenType::Control || m.types[id] == TokenType::UserDefined))
      m.eog[id] = true;
  // Harmony ends a message with <|end|> and the turn with <|return|> or
  // <|call|>: generation goes on past <|end|> (the analysis channel's end).
  if (m.find("<|return|>") >= 0 && m.find("<|call|>") >= 0)
    if (const int32_t id = m.find("<|end|>"); id >= 0 && id != m.eos) m.eog[id] = false;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  auto m = std::make_unique<Impl>();
  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) bad(f, "tokenizer.ggml.model", "missing; the file carries no tokenizer");
  if (*model == "llama")
    m->kind = Kind::Spm;
  else if (*model == "gpt2")
    m->kind = Kind::Bpe;
  else
    bad(f, "tokenizer.ggml.model", fmt::format("'{}' is not supported (llama, gpt2)", *model));
  const bool spm = m->kind == Kind::Spm;

  const gguf::Array* toks =
      array_of(f, "tokenizer.ggml.tokens", SIZE_MAX, {gguf::ValueType::STRING});
  if (!toks || toks->items.empty()) bad(f, "tokenizer.ggml.tokens", "missing or empty");
  if (toks->items.size() > static_cast<size_t>(INT32_MAX))
    bad(f, "tokenizer.ggml.tokens", "more than 2^31 tokens");
  const size_t n = toks->items.size();
  m->tokens.reserve(n);
  for (const auto& t : toks->items) m->tokens.push_back(std::get<std::string>(t.v));

  m->scores.assign(n, 0.0f);
  if (const auto* a =
          array_of(f, "tokenizer.ggml.scores", n, {gguf::ValueType::F32, gguf::ValueType::F64}))
    for (size_t i = 0; i < n; ++i)
      m->scores[i] = static_cast<float>(std::get<double>(a->items[i].v));

  m->types.assign(n, TokenType::Normal);
  if (const auto* a = array_of(f, "tokenizer.ggml.token_type", n,
                               {gguf::ValueType::I32, gguf::ValueType::U32, gguf::ValueType::I8,
                                gguf::ValueType::U8, gguf::ValueType::I64}))
    for (size_t i = 0; i < n; ++i) {
      const auto& v = a->items[i].v;
      const int64_t t = std::holds_alternative<int64_t>(v)
                            ? std::get<int64_t>(v)
                            : static_cast<int64_t>(std::get<uint64_t>(v));
      if (t < 0 || t > 6)
        bad(f, "tokenizer.ggml.token_type",
            fmt::format("token {} has type {}, must be 0..6", i, t));
      m->types[i] = static_cast<TokenType>(t);
    }

  m->token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) m->token_to_id[m->tokens[i]] = static_cast<int32_t>(i);

  std::fill(std::begin(m->byte_token), std::end(m->byte_token), -1);
  if (spm)
    for (int b = 0; b < 256; ++b) m->byte_token[b] = m->find(fmt::format("<0x{:02X}>", b));

  if (!spm) load_bpe(f, *m);
  load_special(f, *m, spm);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(m)));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  if (add_bos && m.add_bos && m.bos >= 0) out.push_back(m.bos);
  bool prev_special = true;  // SPM prefixes a space to the text at the start and after specials
  auto raw = [&](std::string_view frag) {
    if (frag.empty()) return;
    if (m.kind == Kind::Spm) {
      std::string t;
      t.reserve(frag.size() + 3);
      if (m.add_space_prefix && prev_special) t += ' ';
      t += frag;
      m.encode_spm(replace_all(t, " ", kSpace), out);
    } else {
      m.encode_bpe(frag, out);
    }
    prev_special = false;
  };
  // Special tokens are matched verbatim before the model sees the text.
  const std::vector<int32_t>& specials = parse_special ? m.specials : m.user_defined;
  size_t start = 0;
  size_t i = 0;
  while (i < text.size() && !specials.empty()) {
    int32_t hit = -1;
    for (int32_t id : specials)
      if (text.compare(i, m.tokens[id].size(), m.tokens[id]) == 0) {
        hit = id;
        break;
      }
    if (hit < 0) {
      ++i;
      continue;
    }
    raw(text.substr(start, i - start));
    out.push_back(hit);
    prev_special = true;
    i += m.tokens[hit].size();
    start = i;
  }
  raw(text.substr(start));
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= n_vocab())
    throw std::out_of_range(
        fmt::format("token id {} outside the vocabulary (0..{})", id, n_vocab() - 1));
  const std::string& t = m.tokens[id];
  switch (m.types[id]) {
    case TokenType::Control:
      if (special) return t;
      return {};
    case TokenType::Byte: {
      auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
      };
      if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0)
        return std::string(1, static_cast<char>(hex(t[3]) * 16 + hex(t[4])));
      return t;  // a byte token not spelled <0xXX>: show its text
    }
    case TokenType::UserDefined:
      return m.kind == Kind::Spm ? replace_all(t, kSpace, " ") : t;
    case TokenType::Unknown:
      if (m.kind == Kind::Spm) return "\xe2\x96\x85";  // U+2585, as llama.cpp shows <unk>
      return t;
    default:
      break;
  }
  if (m.kind == Kind::Spm) return replace_all(t, kSpace, " ");
  std::string out;
  for (const auto& cp : unicode::decode_utf8(t)) {
    const int b = unicode::unicode_to_byte(cp.cp);
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(t, cp.offset, cp.len);  // not a mapped byte: keep as written
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (!special && token_type(id) == TokenType::Control) continue;
    std::string piece = token_to_piece(id, special);
    if (first && impl_->add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    first = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::bos() const {
  return impl_->bos;
}
int32_t Tokenizer::eos() const {
  return impl_->eos;
}
int32_t Tokenizer::unk() const {
  return impl_->unk;
}
int Tokenizer::n_vocab() const {
  return static_cast<int>(impl_->tokens.size());
}
int32_t Tokenizer::pad() const {
  return impl_->pad;
}
int32_t Tokenizer::eot() const {
  return impl_->eot;
}
std::vector<int32_t> Tokenizer::eog_ids() const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < impl_->eog.size(); ++i)
    if (impl_->eog[i]) out.push_back(static_cast<int32_t>(i));
  return out;
}
const std::string& Tokenizer::chat_template() const {
  return impl_->chat_template;
}
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[static_cast<size_t>(id)];
}
Tokenizer::Kind Tokenizer::kind() const {
  return impl_->kind;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}
const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw std::out_of_range(fmt::format("token id {} outside the vocabulary", id));
  return impl_->tokens[id];
}
Tokenizer::TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw std::out_of_range(fmt::format("token id {} outside the vocabulary", id));
  return impl_->types[id];
}

}  // namespace epyctune::engine
