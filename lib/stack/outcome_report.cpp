#include "stack/outcome_report.hpp"

#include <fmt/format.h>

#include "common/text_table.hpp"

namespace epyctune::stack {

namespace {

bool is_change(KnobStatus s) {
  using enum KnobStatus;
  return s == Applied || s == WouldApply || s == RolledBack || s == Restored;
}

bool is_failure(KnobStatus s) {
  return s == KnobStatus::Failed || s == KnobStatus::Mismatch;
}

common::Tone tone_of(KnobStatus s) {
  using enum KnobStatus;
  using common::Tone;
  switch (s) {
    case Applied:
    case Restored:
      return Tone::good;
    case WouldApply:
    case RolledBack:
      return Tone::change;
    case Failed:
    case Mismatch:
      return Tone::bad;
    case Unchanged:
    case Skipped:
      return Tone::dim;
  }
  return Tone::plain;
}

std::string values_of(const KnobOutcome& o) {
  if (!is_change(o.status) && o.status != KnobStatus::Mismatch) return "";
  return one_line(o.before, 30) + " -> " + one_line(o.after, 40);
}

}  // namespace

std::string outcomes_to_text(const std::vector<KnobOutcome>& knobs, const TextOptions& o) {
  common::TextTable t("  ");
  for (size_t begin = 0; begin < knobs.size();) {
    size_t end = begin;
    while (end < knobs.size() && knobs[end].step == knobs[begin].step) ++end;
    std::vector<FoldInput> in;
    std::vector<size_t> index;
    for (size_t i = begin; i < end; ++i) {
      const auto& k = knobs[i];
      if (k.status == KnobStatus::Unchanged) continue;
      if (o.changed_only && !is_change(k.status) && !is_failure(k.status)) continue;
      in.push_back({k.name, to_string(k.status) + '\n' + values_of(k) + '\n' + k.reason});
      index.push_back(i);
    }
    if (!in.empty()) t.line(knobs[begin].step + ":", common::Tone::heading);
    for (const auto& row : fold_rows(in, !o.per_cpu)) {
      const auto& k = knobs[index[row.members.front()]];
      t.row({{to_string(k.status), tone_of(k.status)},
             one_line(row.name, 44),
             values_of(k),
             k.reason.empty() ? "" : "(" + one_line(k.reason, 200) + ")"});
    }
    begin = end;
  }
  return t.render(o.colour);
}

std::string outcomes_next_step(const std::vector<KnobOutcome>& knobs, bool reverting) {
  bool grub = false, reboot = false;
  for (const auto& k : knobs) {
    if (k.status != KnobStatus::Applied && k.status != KnobStatus::Restored) continue;
    grub |= is_grub_dropin(k.path);
    reboot |= k.reboot_required;
  }
  if (reverting)
    return boot_next_step(grub, grub, "until then the isolation boot parameters stay in force");
  return boot_next_step(grub, grub || reboot, "boot-time settings take effect at next boot");
}

}  // namespace epyctune::stack
