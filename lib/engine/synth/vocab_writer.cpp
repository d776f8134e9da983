// A self-made SentencePiece vocabulary for generated models. Real text must
// tokenize into sensible pieces and decode back exactly, with no external data:
// the vocabulary is built from a fixed list of frequent English words, closed
// under prefixes (so the SPM bigram merges can always build a word one
// character at a time), scored so shorter pieces merge first as in a trained
// BPE-style SPM model, and padded with seeded extensions of existing pieces.
#include "engine/synth/vocab_writer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

namespace epyctune::engine {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";

// Roughly by frequency in English prose.
constexpr std::string_view kWords =
    "the of and to a in is that for it as was with be by on not he i this are or his from at "
    "which but have an they you were her she there been one all we their has would when if so no "
    "will more can who what about out up into them some could him time only other new than then "
    "its do my also over two like these first any may after most your made did many before such "
    "where through people must me years back way should because each just those how much well "
    "very our between even being under long world here make still same own while last might "
    "great year since state against three however used part high both go little place during "
    "without off life good day set says take number another found small end know home house "
    "old large every around often school different right thought work get form down system "
    "water went head left came government without seen come again went never point until once "
    "city name war family country went half together something always side children word "
    "change power early group give american light important thing going best water later case "
    "country young public question national until open course war away men left following "
    "several turn given show days general night area few began less help almost order problem "
    "hand within above study present real known possible money seemed better along times "
    "information find among whole service want room development already use why social second "
    "city taken story true behind business women need least fact body held local often "
    "program next become use started rather today across interest mind death though looked "
    "data model token text language computer memory speed fast test value code file "
    "ing ed er es ly tion ment ness able ous ive al ful less est ist ity ize";

// Sub-word pieces without the word-start marker: endings, then the most
// frequent English letter bigrams and trigrams, so rarer words split into a
// few pieces rather than single letters.
constexpr std::string_view kSuffixes =
    "ing ed er es ly tion ment ness able ous ive al ful less est s "
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le "
    "ve co me de hi ri ro ic ne ea ra ce li ch ll be ma si om ur ck wn mp zy og ow ui ar ir "
    "the and ing ion tio ent ati for her ter hat tha ere ate his con res ver all ons nce men ith "
    "ted ers pro thi wit are ess not ive was ect rea com eve per int est sta cti ica ist ear ain "
    "one our iti rat ick own ump azy ore ble ght igh ome ous ure ity ard ong ack";

constexpr std::string_view kChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"()-[]{}/\\@#$%^&*+=<>_"
    "`~|";

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<std::string> words(std::string_view list) {
  std::vector<std::string> out;
  std::istringstream in{std::string(list)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Number of UTF-8 characters, so "▁the" (4 chars) sorts with other 4-char pieces.
size_t chars(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

void write_synthetic_vocab(gguf::Writer& w, int n_vocab, uint64_t seed) {
  constexpr int kFixed = 3 + 256;
  if (n_vocab < kFixed + 1)
    throw std::invalid_argument(fmt::format(
        "synthetic vocabulary needs at least {} tokens (3 specials, 256 bytes, the space "
        "marker), got {}",
        kFixed + 1, n_vocab));

  // Candidate pieces, each with its prefixes, ordered by length then by first use.
  std::vector<std::string> order;
  std::unordered_set<std::string> seen;
  auto add_with_prefixes = [&](const std::string& piece) {
    size_t i = 0;
    while (i < piece.size()) {
      i += 1;
      while (i < piece.size() && (static_cast<uint8_t>(piece[i]) & 0xC0) == 0x80) ++i;
      std::string p = piece.substr(0, i);
      if (seen.insert(p).second) order.push_back(std::move(p));
    }
  };
  add_with_prefixes(std::string(kSpace));
  for (char c : kChars) add_with_prefixes(std::string(1, c));
  const auto ws = words(kWords);
  for (size_t i = 0; i < ws.size(); ++i) {
    add_with_prefixes(std::string(kSpace) + ws[i]);
    if (i < 120) {  // sentence starts and proper nouns
      std::string cap = ws[i];
      cap[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(cap[0])));
      add_with_prefixes(std::string(kSpace) + cap);
    }
  }
  for (const auto& s : words(kSuffixes)) add_with_prefixes(s);
  for (char c : std::string_view("0123456789")) add_with_prefixes(std::string(kSpace) + c);
  std::stable_sort(order.begin(), order.end(),
                   [](const std::string& a, const std::string& b) { return chars(a) < chars(b); });

  const size_t want = static_cast<size_t>(n_vocab - kFixed);
  if (order.size() > want) order.resize(want);  // shorter pieces first keeps prefixes closed
  // Pad with seeded one-letter extensions of existing word pieces: still
  // prefix-closed, still deterministic for a given seed.
  uint64_t rng = seed;
  size_t guard = 0;
  while (order.size() < want) {
    const std::string& base = order[splitmix64(rng) % order.size()];
    std::string p = base + static_cast<char>('a' + splitmix64(rng) % 26);
    if (seen.insert(p).second) order.push_back(std::move(p));
    if (++guard > want * 64) throw std::logic_error("synthetic vocabulary: padding stalled");
  }

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(n_vocab));
  auto push = [&](std::string t, float score, int32_t type) {
    tokens.push_back(std::move(t));
    scores.push_back(score);
    types.push_back(type);
  };
  push("<unk>", 0.0f, 2);
  push("<s>", 0.0f, 3);
  push("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) push(fmt::format("<0x{:02X}>", b), 0.0f, 6);
  // Score = -rank, as SentencePiece BPE models store them: earlier pieces merge first.
  for (size_t i = 0; i < order.size(); ++i) push(order[i], -static_cast<float>(i), 1);

  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  w.set_f32_array("tokenizer.ggml.scores", std::move(scores));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);
}

void copy_vocab(const gguf::File& src, gguf::Writer& w) {
  if (!src.find("tokenizer.ggml.tokens"))
    throw gguf::FormatError(
        fmt::format("{}: metadata 'tokenizer.ggml.tokens': missing; the file "
                    "carries no vocabulary to copy",
                    src.path()));
  for (const auto& [k, v] : src.metadata())
    if (k.starts_with("tokenizer.")) w.set(k, v);
}

}  // namespace epyctune::engine
