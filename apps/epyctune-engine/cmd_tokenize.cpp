// epyctune-engine tokenize --model M (-p TEXT | -f F) [--bos] [--parse-special] [--json]
//
// Prints the token ids of each input, one line per input, in the format of
// the shared test vectors (" id id id"), so that
//   epyctune-engine tokenize --model V.gguf --file V.gguf.inp | diff - V.gguf.out
// checks a vocabulary against llama.cpp's vectors. --file splits its text on
// lines reading "__ggml_vocab_test__" (a file without one is a single input).
// --json prints one JSON object per line: {"text", "ids", "pieces"}.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "apps/epyctune-engine/commands.hpp"
#include "engine/gguf/gguf.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/tokenizer/vocab_test_format.hpp"

namespace epyctune::engine_cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string file;
  bool bos = false;
  bool parse_special = false;
  bool json = false;
};

int run_tokenize(const TokenizeOptions& o) {
  try {
    const auto file = engine::gguf::File::open(o.model);
    const auto tok = engine::Tokenizer::from_gguf(*file);
    std::vector<std::string> inputs;
    if (!o.file.empty()) {
      std::ifstream in(o.file, std::ios::binary);
      if (!in) {
        std::cerr << fmt::format("tokenize: cannot read --file {}\n", o.file);
        return 1;
      }
      const std::string raw{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      inputs = engine::split_vocab_test_inputs(raw);
    } else {
      inputs.push_back(o.text);
    }
    std::string out;
    for (const auto& text : inputs) {
      const auto ids = tok->encode(text, o.bos, o.parse_special);
      if (o.json) {
        nlohmann::json pieces = nlohmann::json::array();
        for (int32_t id : ids) pieces.push_back(tok->token_to_piece(id, o.parse_special));
        const nlohmann::json j{{"text", text}, {"ids", ids}, {"pieces", pieces}};
        // Invalid UTF-8 in the input or a byte piece is shown as U+FFFD.
        out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } else {
        out += engine::format_vocab_test_ids(ids);
      }
      out += '\n';
    }
    std::cout << out << std::flush;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tokenize: " << e.what() << '\n';
    return 1;
  }
}

void add_tokenize_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of text with a GGUF vocabulary");
  cmd->add_option("--model,-m", opts->model, "GGUF file with tokenizer.ggml.* metadata")
      ->required()
      ->check(CLI::ExistingFile);
  auto* text = cmd->add_option("-p,--prompt,--text", opts->text, "text to tokenize");
  auto* file = cmd->add_option("--file,-f", opts->file,
                               "file of inputs separated by __ggml_vocab_test__ lines")
                   ->check(CLI::ExistingFile);
  text->excludes(file);
  file->excludes(text);
  cmd->add_flag("--bos", opts->bos,
                "prepend BOS when the vocabulary asks for it (default off, "
                "as in the shared test vectors)");
  cmd->add_flag("--parse-special", opts->parse_special,
                "text spelling a control token (<|im_start|>) becomes that token");
  cmd->add_flag("--json", opts->json, "one JSON object per input: text, ids, pieces");
  cmd->callback([opts, text, file, &global] {
    if (text->count() == 0 && file->count() == 0) {
      std::cerr << "tokenize: give -p TEXT or -f FILE\n";
      global.exit_code = 2;
      return;
    }
    global.exit_code = run_tokenize(*opts);
  });
}

const Registrar reg(&add_tokenize_command);

}  // namespace
}  // namespace epyctune::engine_cli
