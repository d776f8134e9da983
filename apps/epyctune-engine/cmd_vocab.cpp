// epyctune-engine vocab --from-json tokenizer.json [--config C] [--pre NAME] OUT.gguf
//
// Writes a vocabulary-only GGUF from a Hugging Face tokenizer.json, so the
// tokenizer tests (and mkmodel --vocab) can use real vocabularies without
// downloading a model.
#include <iostream>

#include "apps/epyctune-engine/commands.hpp"
#include "engine/synth/vocab_json.hpp"

namespace epyctune::engine_cli {
namespace {

struct VocabOptions {
  std::string out;
  engine::VocabJsonOptions json;
  std::string tokenizer_json, config_json;
};

void add_vocab_command(CLI::App& app, GlobalOptions& global) {
  auto o = std::make_shared<VocabOptions>();
  auto* cmd = app.add_subcommand("vocab", "Write a vocabulary-only GGUF from a tokenizer.json");
  cmd->add_option("out", o->out, "output GGUF path")->required();
  cmd->add_option("--from-json", o->tokenizer_json, "Hugging Face tokenizer.json")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--config", o->config_json,
                  "tokenizer_config.json (default: the one beside tokenizer.json)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--pre", o->json.pre,
                  "tokenizer.ggml.pre name (default: recognised from the pattern)");
  cmd->add_option("--name", o->json.name, "general.name");
  cmd->callback([o, &global] {
    try {
      o->json.tokenizer_json = o->tokenizer_json;
      o->json.config_json = o->config_json;
      engine::write_vocab_gguf(o->out, o->json);
      global.exit_code = 0;
    } catch (const std::exception& e) {
      std::cerr << "vocab: " << e.what() << '\n';
      global.exit_code = 1;
    }
  });
}

const Registrar reg(&add_vocab_command);

}  // namespace
}  // namespace epyctune::engine_cli
