#include "profile/loader.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/input_file.hpp"
#include "profile/builtin.hpp"
#include "profile/schema.hpp"

namespace epyctune::profile {

namespace fs = std::filesystem;

std::string Diagnostic::str() const {
  std::string pos = line > 0 ? fmt::format("{}:{}:{}", file, line, column) : file;
  return fix.empty() ? fmt::format("{}: {}", pos, what) : fmt::format("{}: {}; {}", pos, what, fix);
}

namespace {
std::string join_diags(const std::vector<Diagnostic>& d) {
  std::string out;
  for (const auto& x : d) {
    if (!out.empty()) out += '\n';
    out += x.str();
  }
  return out;
}
}  // namespace

ProfileError::ProfileError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join_diags(diagnostics)), diags_(std::move(diagnostics)) {}

ProfileError::ProfileError(std::string file, int line, int column, std::string what,
                           std::string fix)
    : ProfileError(std::vector<Diagnostic>{
          {std::move(file), line, column, std::move(what), std::move(fix)}}) {}

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 1 << 30;
  for (const auto& c : candidates) {
    int d = edit_distance(word, c);
    // On a tie, a candidate the word is a prefix of reads as the intended one.
    bool better = d < best_d || (d == best_d && c.rfind(word, 0) == 0 && best.rfind(word, 0) != 0);
    if (better) best_d = d, best = c;
  }
  // Beyond a third of the word, a "did you mean" is noise.
  int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  return best_d <= limit ? best : "";
}

namespace {

// A profile source: a built-in or a file on disk.
struct Source {
  std::string id;       // "builtin:epyc-9754" or the canonical path: detects include cycles
  std::string display;  // what messages call it
  std::string text;
  fs::path dir;  // for relative includes; empty for built-ins
  // Set when the file exists by name but cannot be a profile (a directory, a
  // FIFO, a device, too large): what to tell the operator instead of parsing.
  std::string error;
};

struct BuiltinIndex {
  std::map<std::string, std::string> by_name;  // name or alias -> file
};

std::string stem_of(std::string_view file) {
  std::string f(file);
  return f.substr(0, f.rfind(".toml"));
}

const BuiltinIndex& builtin_index() {
  static const BuiltinIndex idx = [] {
    BuiltinIndex b;
    for (const auto& bp : builtin_profiles()) {
      std::string stem = stem_of(bp.file);
      b.by_name[stem] = std::string(bp.file);
      // Aliases come from the file itself; a broken built-in surfaces on load.
      try {
        auto res = toml::parse(bp.text, std::string(bp.file));
        if (auto* al = res["aliases"].as_array())
          for (const auto& a : *al)
            if (auto s = a.value<std::string>()) b.by_name[*s] = std::string(bp.file);
      } catch (const toml::parse_error&) {
        // reported with its position when the profile itself is loaded
      }
    }
    return b;
  }();
  return idx;
}

std::optional<Source> find_builtin(std::string_view name) {
  const auto& idx = builtin_index();
  auto it = idx.by_name.find(std::string(name));
  if (it == idx.by_name.end()) return std::nullopt;
  for (const auto& bp : builtin_profiles())
    if (bp.file == it->second)
      return Source{"builtin:" + stem_of(bp.file),
                    "profiles/" + std::string(bp.file),
                    std::string(bp.text),
                    {},
                    ""};
  return std::nullopt;
}

bool looks_like_path(std::string_view ref) {
  return ref.find('/') != std::string_view::npos ||
         (ref.size() > 5 && ref.substr(ref.size() - 5) == ".toml");
}

std::optional<Source> read_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  Source src{p.string(), p.string(), "", p.parent_path(), ""};
  try {
    src.text = common::read_input_file(p, common::kMaxProfileBytes, "profile");
  } catch (const common::InputFileError& e) {
    // "PATH: why" -> "why": the diagnostic names the file itself.
    std::string what = e.what();
    src.error = what.rfind(p.string() + ": ", 0) == 0 ? what.substr(p.string().size() + 2) : what;
    return src;
  }
  auto canon = fs::weakly_canonical(p, ec);
  if (!ec) src.id = canon.string();
  return src;
}

std::string known_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : builtin_index().by_name) names.push_back(n);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<std::string> all_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : builtin_index().by_name) names.push_back(n);
  return names;
}

// The file in the sysroot's override directory that stands for NAME, if any.
// A built-in is overridden under its own name whichever alias names it.
std::optional<fs::path> find_override(std::string_view ref, const host::Sysroot* root) {
  if (!root || looks_like_path(ref) || ref.empty()) return std::nullopt;
  std::string name(ref);
  const auto& idx = builtin_index().by_name;
  if (auto it = idx.find(name); it != idx.end()) name = stem_of(it->second);
  auto p = root->resolve(fmt::format("{}/{}.toml", kProfileOverrideDir, name));
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return p;
  return std::nullopt;
}

// Resolves a reference from the command line (from == nullptr) or an include.
// Only a name on the command line looks in the override directory: an
// override that includes its own name extends the built-in.
std::optional<Source> locate(std::string_view ref, const Source* from,
                             const host::Sysroot* root = nullptr) {
  if (looks_like_path(ref)) {
    fs::path p(ref);
    if (from && p.is_relative() && !from->dir.empty()) p = from->dir / p;
    return read_file(p);
  }
  if (!from)
    if (auto o = find_override(ref, root)) return read_file(*o);
  if (auto b = find_builtin(ref)) return b;
  if (!from) {
    std::error_code ec;
    if (fs::exists(fs::path(ref), ec)) return read_file(fs::path(ref));
  } else if (!from->dir.empty()) {
    // "include = 'mybase'" next to the including file.
    auto p = from->dir / (std::string(ref) + ".toml");
    std::error_code ec;
    if (fs::exists(p, ec)) return read_file(p);
  }
  return std::nullopt;
}

void apply_source(const Source& src, Profile& p, std::vector<std::string>& stack,
                  std::vector<Diagnostic>& diags, bool outermost) {
  if (!src.error.empty()) {
    diags.push_back({src.display, 0, 0, src.error, ""});
    return;
  }
  toml::table t;
  try {
    t = toml::parse(src.text, src.display);
  } catch (const toml::parse_error& err) {
    diags.push_back(detail::diag_at(err.source(), src.display, std::string(err.description()),
                                    "fix the TOML syntax"));
    return;
  }
  stack.push_back(src.id);
  if (const toml::node* inc = t.get("include")) {
    auto ref = inc->value_exact<std::string>();
    if (!ref) {
      diags.push_back(detail::diag_at(inc->source(), src.display, "include must be a string",
                                      "e.g. include = \"base\""));
    } else if (auto parent = locate(*ref, &src)) {
      if (!parent->error.empty()) {
        diags.push_back(detail::diag_at(
            inc->source(), src.display,
            fmt::format("include \"{}\" ({}): {}", *ref, parent->display, parent->error),
            "include a profile file or a built-in name"));
      } else if (std::find(stack.begin(), stack.end(), parent->id) != stack.end()) {
        std::string chain;
        for (const auto& s : stack) chain += s + " -> ";
        diags.push_back(detail::diag_at(inc->source(), src.display,
                                        fmt::format("include cycle: {}{}", chain, parent->id),
                                        "remove one of the includes"));
      } else {
        apply_source(*parent, p, stack, diags, false);
        p.includes.push_back(parent->display);
      }
    } else {
      std::string near = closest(*ref, all_names());
      diags.push_back(detail::diag_at(
          inc->source(), src.display,
          fmt::format("include \"{}\": no such profile or file",
                      ref->size() <= 64 ? *ref : ref->substr(0, 64) + "..."),
          near.empty()
              ? fmt::format("built-in profiles: {}; a path is relative to this file", known_names())
              : fmt::format("did you mean \"{}\"?", near)));
    }
  }
  detail::ApplyContext ctx{src.display, p, diags, outermost};
  detail::apply_table(t, ctx);
  if (outermost) p.source_file = src.display;
  stack.pop_back();
}

Profile load_source(const Source& src) {
  Profile p;
  std::vector<std::string> stack;
  std::vector<Diagnostic> diags;
  apply_source(src, p, stack, diags, true);
  if (!diags.empty()) throw ProfileError(std::move(diags));
  std::reverse(p.includes.begin(), p.includes.end());  // outermost first
  if (p.name.empty()) {
    // The name goes into the boot loader drop-in and the journal: a file
    // name that is not a valid name must not become one.
    p.name = fs::path(src.display).stem().string();
    if (auto why = detail::identifier_problem(p.name); !why.empty())
      throw ProfileError(src.display, 1, 1,
                         fmt::format("the profile sets no name and its file name {}", why),
                         "set name = \"my-host\" (A-Z a-z 0-9 . _ -) at the top of the file");
  }
  validate_profile(p, nullptr, nullptr);
  return p;
}

}  // namespace

Profile load_profile(std::string_view ref, const host::Sysroot* root) {
  if (auto src = locate(ref, nullptr, root)) return load_source(*src);
  if (looks_like_path(ref))
    throw ProfileError(std::string(ref), 0, 0, "cannot read the profile file",
                       "check the path (a built-in is named without .toml, e.g. 9754)");
  std::string near = closest(ref, all_names());
  throw ProfileError(std::string(ref), 0, 0, "no such built-in profile",
                     near.empty() ? fmt::format("built-in profiles: {}", known_names())
                                  : fmt::format("did you mean '{}'?", near));
}

Profile load_profile_text(std::string_view text, const std::string& display_name) {
  std::error_code ec;
  fs::path p(display_name);
  return load_source(Source{display_name, display_name, std::string(text), p.parent_path(), ""});
}

std::vector<std::string> list_profiles() {
  std::vector<std::string> out;
  for (const auto& bp : builtin_profiles()) {
    auto stem = stem_of(bp.file);
    if (stem != "base") out.push_back(stem);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string builtin_profile_text(std::string_view name) {
  if (auto b = find_builtin(name)) return b->text;
  throw ProfileError(std::string(name), 0, 0, "no such built-in profile",
                     fmt::format("built-in profiles: {}", known_names()));
}

}  // namespace epyctune::profile

namespace epyctune::profile {

std::vector<ProfileListing> list_profile_sources(const host::Sysroot* root) {
  std::map<std::string, ProfileListing> by_name;
  for (const auto& n : list_profiles()) by_name[n] = {n, "", false, ""};
  if (root) {
    const auto& idx = builtin_index().by_name;
    for (const auto& f : root->list(kProfileOverrideDir)) {
      if (!f.ends_with(".toml")) continue;
      std::string stem = stem_of(f);
      auto& l = by_name[stem];
      l.name = stem;
      l.file = root->resolve(fmt::format("{}/{}", kProfileOverrideDir, f)).string();
      auto it = idx.find(stem);
      if (it != idx.end() && stem_of(it->second) == stem) {
        l.overrides_builtin = true;
      } else if (it != idx.end()) {
        l.ignored = fmt::format("{} is an alias of {}; name the file {}.toml to override it", stem,
                                stem_of(it->second), stem_of(it->second));
      }
    }
  }
  std::vector<ProfileListing> out;
  for (auto& [n, l] : by_name) out.push_back(std::move(l));
  return out;
}

}  // namespace epyctune::profile
