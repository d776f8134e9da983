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

  std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  if (!spm) {
    if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
      m->pre = PreTokenizer::Gpt2;
    } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "smaug-bpe") {
      m->pre = PreTokenizer::Llama3;
      m->ignore_merges = true;
    } else {
      bad(f, "tokenizer.ggml.pre",
          fmt::format("pre-tokenizer '{}' is not supported (default, gpt2, llama3, llama-bpe, "
                      "smaug-bpe)",
                      pre));
    }
    const gguf::Array* merges =
        array_of(f, "tokenizer.ggml.merges", SIZE_MAX, {gguf::ValueType::STRING});
    if (!merges) bad(f, "tokenizer.ggml.merges", "missing; a gpt2 tokenizer needs its merges");
    m->merges.reserve(merges->items.size());
    for (const auto& it : merges->items) m->merges.push_back(std::get<std::string>(it.v));
    m->merge_rank.reserve(m->merges.size());
    for (size_t i = 0; i < m->merges.size(); ++i) {
      const std::string& s = m->merges[i];
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= s.size())
        bad(f, "tokenizer.ggml.merges",
            fmt::format("merge #{} '{}' is not two symbols separated by a space", i, s));
      m->merge_rank.emplace(s, static_cast<int32_t>(i));  // first listing wins
    }
  }

  // Defaults are llama.cpp's for each model when the file does not say.
  m->bos = token_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : 11, n);
  m->eos = token_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : 11, n);
  m->unk = token_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  m->pad = token_id(f, "tokenizer.ggml.padding_token_id", -1, n);
  m->add_bos =
      f.get_bool("tokenizer.ggml.add_bos_token").value_or(spm || m->pre == PreTokenizer::Llama3);
  m->add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);

  for (size_t i = 0; i < n; ++i)
    if (m->types[i] == TokenType::UserDefined && !m->tokens[i].empty())
      m->user_defined.push_back(static_cast<int32_t>(i));
  std::stable_sort(m->user_defined.begin(), m->user_defined.end(),
                   [&](int32_t a, int32_t b) { return m->tokens[a].size() > m->tokens[b].size(); });

  m->eog.assign(n, false);
  if (m->eos >= 0) m->eog[m->eos] = true;
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const int32_t id = token_id(f, key, -1, n); id >= 0) m->eog[id] = true;
  // Chat vocabularies end turns with these even when no key names them.
  for (std::string_view s : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                             "<|endoftext|>", "<|eom_id|>", "<EOT>"})
    if (const int32_t id = m->find(s);
        id >= 0 && (m->types[id] == TokenType::Control || m->types[id] == TokenType::UserDefined))
      m->eog[id] = true;

  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(m)));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
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
  // User-defined tokens are matched verbatim before the model sees the text.
  size_t start = 0;
  size_t i = 0;
  while (i < text.size() && !m.user_defined.empty()) {
    int32_t hit = -1;
    for (int32_t id : m.user_defined)
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

std::string Tokenizer::token_to_piece(int32_t id) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= n_vocab())
    throw std::out_of_range(
        fmt::format("token id {} outside the vocabulary (0..{})", id, n_vocab() - 1));
  const std::string& t = m.tokens[id];
  switch (m.types[id]) {
    case TokenType::Control:
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

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (token_type(id) == TokenType::Control) continue;
    std::string piece = token_to_piece(id);
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
