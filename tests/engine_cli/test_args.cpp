// llama.cpp's single-dash long options reach CLI11 as its long options.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"

using epyctune::engine_cli::llama_style_args;

namespace {
std::vector<std::string> in_order(std::vector<const char*> argv) {
  auto args = llama_style_args(static_cast<int>(argv.size()), argv.data());
  return {args.rbegin(), args.rend()};  // CLI11 takes them reversed
}
}  // namespace

TEST_CASE("-md becomes --model-draft; everything else is left alone") {
  CHECK(in_order({"engine", "generate", "-m", "t.gguf", "-md", "d.gguf", "-p", "-md"}) ==
        std::vector<std::string>{"generate", "-m", "t.gguf", "--model-draft", "d.gguf", "-p",
                                 "--model-draft"});
  CHECK(in_order({"engine", "generate", "-md=d.gguf", "-mdx", "-m"}) ==
        std::vector<std::string>{"generate", "--model-draft=d.gguf", "-mdx", "-m"});
  CHECK(in_order({"engine", "generate", "--", "-md"}) ==
        std::vector<std::string>{"generate", "--", "-md"});
  CHECK(in_order({"engine"}).empty());
}

TEST_CASE("CLI11 parses the rewritten arguments as --model-draft") {
  CLI::App app;
  auto* gen = app.add_subcommand("generate");
  std::string model, draft;
  gen->add_option("-m,--model", model);
  gen->add_option("--model-draft", draft);
  std::vector<const char*> argv{"engine", "generate", "-m", "t.gguf", "-md", "d.gguf"};
  app.parse(llama_style_args(static_cast<int>(argv.size()), argv.data()));
  CHECK(model == "t.gguf");
  CHECK(draft == "d.gguf");
}
