// llama.cpp's single-dash long options reach CLI11 as its long options.
#include <doctest/doctest.h>

#include <string>
#include <utility>
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

TEST_CASE("every llama.cpp single-dash long name has its long spelling") {
  // Before: only -md; CLI11 read "-ngl 99" as -n gl 99, "-td 2" as -t d 2,
  // "-np 4" as -n p 4, "-sys S" as -s ys S.
  const std::vector<std::pair<const char*, const char*>> names = {
      {"-md", "--model-draft"},   {"-td", "--threads-draft"},
      {"-np", "--parallel"},      {"-sys", "--system-prompt"},
      {"-cnv", "--conversation"}, {"-no-cnv", "--no-conversation"},
      {"-ngl", "--n-gpu-layers"}, {"-ngld", "--n-gpu-layers-draft"},
      {"-fa", "--flash-attn"},    {"-sm", "--split-mode"},
      {"-ts", "--tensor-split"},  {"-mg", "--main-gpu"},
      {"-dev", "--device"},       {"-nkvo", "--no-kv-offload"},
  };
  for (const auto& [from, to] : names) {
    CAPTURE(from);
    CHECK(in_order({"engine", "serve", from, "1"}) == std::vector<std::string>{"serve", to, "1"});
    const std::string eq = std::string(from) + "=2";
    CHECK(in_order({"engine", "serve", eq.c_str()}) ==
          std::vector<std::string>{"serve", std::string(to) + "=2"});
  }
  // One-letter options and their attached values are CLI11's own.
  CHECK(in_order({"engine", "generate", "-c", "2048", "-s", "42", "-n8", "-t4"}) ==
        std::vector<std::string>{"generate", "-c", "2048", "-s", "42", "-n8", "-t4"});
}

TEST_CASE("CLI11 parses the rewritten GPU, parallel and system-prompt options") {
  CLI::App app;
  auto* gen = app.add_subcommand("generate");
  int n = 16, np = 1, td = 0;
  std::string sys, ngl;
  gen->add_option("-n,--n-predict", n);
  gen->add_option("--parallel", np);
  gen->add_option("--threads-draft", td);
  gen->add_option("--system-prompt", sys);
  gen->add_option("--n-gpu-layers", ngl);
  std::vector<const char*> argv{"engine", "generate", "-ngl", "99", "-np", "4",
                                "-td",    "2",        "-sys", "S",  "-n",  "8"};
  app.parse(llama_style_args(static_cast<int>(argv.size()), argv.data()));
  CHECK(ngl == "99");
  CHECK(np == 4);
  CHECK(td == 2);
  CHECK(sys == "S");
  CHECK(n == 8);
}
