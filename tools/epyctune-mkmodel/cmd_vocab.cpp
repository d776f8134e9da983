// epyctune-mkmodel vocab --from-json tokenizer.json [--config C] [--pre NAME] OUT.gguf
//
// Writes a vocabulary-only GGUF from a Hugging Face tokenizer.json, so the
// tokenizer tests (and mkmodel --vocab) can use real vocabularies without
// downloading a model.
#include <iostream>

#include "engine/synth/vocab_json.hpp"
#include "tools/epyctune-mkmodel/commands.hpp"

namespace epyctune::mkmodel_tool {
namespace {

struct VocabOptions {
  std::string out;
  engine::VocabJsonOptions json;
  std::string tokenizer_json, config_json;
};

}  // namespace

void add_vocab_command(CLI::App& app, int& exit_code) {
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
  cmd->callback([o, &exit_code] {
    try {
      o->json.tokenizer_json = o->tokenizer_json;
      o->json.config_json = o->config_json;
      engine::write_vocab_gguf(o->out, o->json);
      exit_code = 0;
    } catch (const std::exception& e) {
      std::cerr << "vocab: " << e.what() << '\n';
      exit_code = 1;
    }
  });
}

}  // namespace epyctune::mkmodel_tool
