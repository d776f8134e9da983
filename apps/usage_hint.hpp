// The usage error a person can act on. CLI11 reports the last check that
// failed, which after a typo is the wrong one: `epyctune aply` says "A
// subcommand is required" and `plan --profle 9754` "--profile is required".
// On a parse error the mains of epyctune, epyctune-engine and epyctuned walk
// the arguments again against their CLI11 tree, find the first word that is
// no subcommand or option there, and name it with the nearest known ones.
// Header-only: each binary includes it next to its CLI11 parse.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/did_you_mean.hpp"

namespace epyctune::usage {

struct UnknownWord {
  std::string command;  // "epyctune plan": where it was met
  std::string message;  // "unknown option '--profle' (did you mean '--profile'?)"
};

namespace detail {

inline bool takes_value(const CLI::Option* o) {
  return o->get_type_size_max() > 0 && o->get_items_expected_max() > 0;
}

// Options are looked up in the command and its parents (global options may
// follow a subcommand in epyctune; elsewhere CLI11 names them itself).
inline const CLI::Option* find_option(const std::vector<CLI::App*>& chain,
                                      const std::string& name) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    for (const auto* o : (*it)->get_options())
      if (o->nonpositional() && o->check_name(name)) return o;
  return nullptr;
}

inline std::vector<std::string> option_names(const std::vector<CLI::App*>& chain) {
  std::vector<std::string> names;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    for (const auto* o : (*it)->get_options()) {
      for (const auto& l : o->get_lnames()) names.push_back("--" + l);
      for (const auto& s : o->get_snames()) names.push_back("-" + s);
    }
  return names;
}

inline std::vector<std::string> command_names(CLI::App& app) {
  std::vector<std::string> names;
  for (auto* s : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(s->get_name());
    for (const auto& a : s->get_aliases()) names.push_back(a);
  }
  return names;
}

inline std::string path_of(const std::vector<CLI::App*>& chain) {
  std::string p = chain.front()->get_name();  // argv[0] unless the main named it
  p = p.substr(p.rfind('/') + 1);
  for (size_t i = 1; i < chain.size(); ++i) p += " " + chain[i]->get_name();
  return p;
}

inline std::string named(const std::string& what, const std::string& word,
                         const std::vector<std::string>& known) {
  std::string hint = common::did_you_mean(word, known);
  return "unknown " + what + " '" + word + "'" + (hint.empty() ? "" : " (" + hint + ")");
}

}  // namespace detail

// The first argument `app` knows nothing of, or nullopt when every word is
// known (then CLI11's own message is the right one). `args` are argv[1..].
inline std::optional<UnknownWord> first_unknown(CLI::App& app,
                                                const std::vector<std::string>& args) {
  using namespace detail;
  std::vector<CLI::App*> chain{&app};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      bool is_long = a.size() > 2 && a[1] == '-';
      size_t eq = a.find('=');
      std::string name = is_long ? a.substr(0, eq) : a.substr(0, 2);
      const auto* o = find_option(chain, name);
      if (!o && !is_long && a.size() > 2) name = a.substr(0, eq);  // "-profile": a long typo
      if (!o) return UnknownWord{path_of(chain), named("option", name, option_names(chain))};
      bool inline_value = is_long ? eq != std::string::npos : a.size() > 2;
      if (takes_value(o) && !inline_value) ++i;
      continue;
    }
    CLI::App* cur = chain.back();
    CLI::App* sub = nullptr;
    for (auto* s : cur->get_subcommands([](CLI::App*) { return true; }))
      if (s->check_name(a)) sub = s;
    if (sub) {
      chain.push_back(sub);
      continue;
    }
    bool has_positionals =
        !cur->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    if (!has_positionals && !command_names(*cur).empty())
      return UnknownWord{path_of(chain), named("command", a, command_names(*cur))};
  }
  return std::nullopt;
}

// Prints the unknown word and returns true when there is one; false leaves
// the error to CLI11's app.exit().
inline bool explain_unknown(CLI::App& app, const std::vector<std::string>& args) {
  auto u = first_unknown(app, args);
  if (!u) return false;
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for the commands and options.\n",
               u->command.c_str(), u->message.c_str(), u->command.c_str());
  return true;
}

}  // namespace epyctune::usage
