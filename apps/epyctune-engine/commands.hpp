// Subcommand registration for epyctune-engine: each cmd_*.cpp adds itself
// with a static Registrar, so adding a command never edits main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace epyctune::engine_cli {

struct GlobalOptions {
  int exit_code = 0;  // set by the command's callback
};

using RegisterFn = void (*)(CLI::App& app, GlobalOptions& global);
std::vector<RegisterFn>& registry();

struct Registrar {
  explicit Registrar(RegisterFn fn) { registry().push_back(fn); }
};

// llama.cpp spells some long options with one dash (-md for --model-draft,
// -ngl, -np, -td, -sys...); CLI11 reads "-md" as -m with the value "d" and
// cannot register such names. Returns argv[1..] with each of them (also as
// -md=FILE) spelled as its long option, everything after "--" untouched, in
// the reversed order App::parse(vector) takes:
// app.parse(llama_style_args(argc, argv)).
std::vector<std::string> llama_style_args(int argc, const char* const* argv);

}  // namespace epyctune::engine_cli
