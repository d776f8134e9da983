#include "stack/confine.hpp"

#include <fmt/format.h>

#include <vector>

#include "stack/journal.hpp"

namespace epyctune::stack {

namespace {

// Splits an absolute path into components; "" and sets `problem` when the
// path is not in the plain form every knob path has.
std::vector<std::string> components(std::string_view path, std::string& problem) {
  std::vector<std::string> out;
  if (path.empty() || path.front() != '/') {
    problem = "is not absolute";
    return out;
  }
  for (char c : path)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      problem = "holds a control character";
      return out;
    }
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view c = path.substr(pos, slash - pos);
    if (c.empty()) {
      problem = "has an empty component ('//' or a trailing '/')";
      return out;
    }
    if (c == "." || c == "..") {
      problem = fmt::format("has a '{}' component", c);
      return out;
    }
    out.emplace_back(c);
    pos = slash + 1;
  }
  return out;
}

// True when `path` is `root` or below it (component-wise).
bool under(std::string_view path, std::string_view root, bool strictly) {
  if (path == root) return !strictly;
  return path.size() > root.size() && path.starts_with(root) && path[root.size()] == '/';
}

bool epyctune_own(std::string_view path) {
  std::string_view lock = kLockPath;
  return path == kJournalPath || path == kLockPath ||
         (path.starts_with(lock) && path.size() > lock.size() && path[lock.size()] == '.');
}

std::string allowed(const KnobLocation& loc, const std::vector<std::string>& parts) {
  const std::string& p = loc.path;
  switch (loc.kind) {
    case KnobKind::Value:
      if (under(p, "/sys", true) || under(p, "/proc/sys", true) || under(p, "/proc/irq", true))
        return "";
      return "a value knob must be under /sys, /proc/sys or /proc/irq";
    case KnobKind::File:
      if (epyctune_own(p)) return "is epyctune's own journal or lock";
      if (under(p, kGrubDropinDir, true) || under(p, kStateDir, true)) return "";
      return fmt::format("a file knob must be under {} or {}", kGrubDropinDir, kStateDir);
    case KnobKind::Dir:
      if (p == "/etc" || p == "/etc/default" || p == "/var" || p == "/var/lib") return "";
      if (under(p, kGrubDropinDir, false) || under(p, kStateDir, false)) return "";
      if (under(p, kResctrlRoot, true) && parts.size() == 4) return "";
      return fmt::format("a directory knob must be {}, a resctrl group under {}, or under {}",
                         kGrubDropinDir, kResctrlRoot, kStateDir);
    case KnobKind::Msr:
      if (parts.size() == 4 && parts[0] == "dev" && parts[1] == "cpu" && parts[3] == "msr" &&
          parts[2] == std::to_string(loc.cpu) && loc.cpu >= 0)
        return "";
      return fmt::format("an MSR knob must be /dev/cpu/{}/msr", loc.cpu);
    case KnobKind::Schemata:
      if (p == std::string(kResctrlRoot) + "/schemata" ||
          (under(p, kResctrlRoot, true) && parts.size() == 5 && parts[4] == "schemata"))
        return "";
      return fmt::format("a schemata knob must be {0}/schemata or {0}/<group>/schemata",
                         kResctrlRoot);
    case KnobKind::Cmdline:
      return p == "/proc/cmdline" ? "" : "a command-line knob reads /proc/cmdline only";
    case KnobKind::Check:
      return "";
  }
  return "unknown knob kind";
}

}  // namespace

std::string location_problem(const KnobLocation& loc) {
  std::string problem;
  auto parts = components(loc.path, problem);
  if (problem.empty()) problem = allowed(loc, parts);
  if (problem.empty()) return "";
  return fmt::format("{} knob path '{}' {}", to_string(loc.kind), loc.path,
                     problem.starts_with("a ") ? "is refused: " + problem : problem);
}

std::string component_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return fmt::format("is '{}'", name);
  if (name.size() > 255) return "is longer than 255 bytes";
  for (char c : name) {
    if (c == '/') return "holds a '/'";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "holds a control character";
  }
  return "";
}

}  // namespace epyctune::stack
