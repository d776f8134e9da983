// A profile section described once: its table's name, each key with how the
// loader reads it and how `profile show` prints it, and the checks across its
// keys. The loader, `profile show` and validation all work from these
// descriptions, so a key is spelled in one place. The profile-wide sections
// ([hardware], [partition], [engine]) are described in schema.cpp; each step
// of the stack describes its own in its file, as part of its record
// (stack/steps.hpp), which hands it to the loader (register_step_schema).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/cpulist.hpp"
#include "host/capabilities.hpp"
#include "host/topology.hpp"
#include "profile/loader.hpp"
#include "profile/profile.hpp"

namespace epyctune::profile {

namespace detail {
struct TableState;  // one TOML table being read (schema.cpp)
}

// Reads the keys of one TOML table, recording where each was set. A bad value
// becomes a diagnostic and leaves the default in place, so one load reports
// every problem of a file.
class KeyReader {
 public:
  explicit KeyReader(detail::TableState& s) : s_(s) {}
  KeyReader(const KeyReader&) = delete;
  KeyReader& operator=(const KeyReader&) = delete;

  // Rejects keys not in `keys`, suggesting the closest one.
  void known(const std::vector<std::string>& keys);
  bool has(const char* key) const;

  void get(const char* key, bool& out);
  template <typename Int>
  void get_int(const char* key, Int& out, int64_t lo, int64_t hi) {
    if (auto v = int_value(key, lo, hi)) out = static_cast<Int>(*v);
  }
  void get(const char* key, double& out, double lo, double hi);
  // A string, one of `allowed` unless that is empty.
  void get(const char* key, std::string& out, const std::vector<std::string>& allowed = {});
  // A name that ends up in a file name, a resctrl group or a boot loader
  // comment: identifier_problem() says what is allowed.
  void get_identifier(const char* key, std::string& out);
  // Free text shown to people (descriptions, notes, citations): one line,
  // no control characters, at most max_len bytes.
  void get_text(const char* key, std::string& out, size_t max_len);
  void get_texts(const char* key, std::vector<std::string>& out, size_t max_items, size_t max_len);
  // An absolute path epyctune writes to: components are identifiers, no "."
  // or "..", at most kMaxPath bytes. `dir` and `ext`, when given, pin the
  // directory and the extension.
  void get_path(const char* key, std::string& out, std::string_view dir, std::string_view ext,
                const std::string& example);
  void get(const char* key, std::vector<std::string>& out);
  void get(const char* key, std::vector<int>& out, int64_t lo, int64_t hi);
  // A kernel CPU list string ("0-1,128-129").
  void get_cpulist(const char* key, std::vector<int>& out);
  // "all" or a hex way mask ("fff0", "0xfff0"), kept lower case without 0x.
  void get_cbm(const char* key, std::string& out);
  // "max" | "min" | a frequency in kHz.
  void get_freq(const char* key, std::string& out);
  // The key's string when it holds one (its origin recorded), else nullopt
  // without a diagnostic: for keys that take a word or a number.
  std::optional<std::string> if_string(const char* key);
  // Each table of the array of tables `key` ([[section.key]]), read with a
  // reader of its own; false (and a diagnostic showing `example`) when `key`
  // is something else.
  bool each_table(const char* key, const char* example,
                  const std::function<void(KeyReader&)>& read);

  // A problem with the value of `key`, at its position.
  void error(const char* key, std::string what, std::string fix);
  // A problem with this table as a whole (an entry of [[...]] lacking a key).
  void error_here(std::string what, std::string fix);
  // "section.key", as messages and origins name a key.
  std::string dotted(std::string_view key) const;

 private:
  std::optional<int64_t> int_value(const char* key, int64_t lo, int64_t hi);
  detail::TableState& s_;
};

// Collects validation errors, each at the position of the key that has to
// change (or naming it, for a profile built in code).
class Checker {
 public:
  explicit Checker(const Profile& p) : p_(p) {}
  void error(const std::string& key, std::string what, std::string fix);
  // Throws ProfileError with every error collected, if any.
  void finish();

 private:
  const Profile& p_;
  std::vector<Diagnostic> diags_;
};

// Limits of free text in profiles.
inline constexpr size_t kShortText = 128;  // codename, memory type, a citation's model
inline constexpr size_t kLongText = 1024;  // a description, a note, a citation, a reason

// What validation may compare a profile with; null = not known.
struct CheckHost {
  const host::Topology* topo = nullptr;
  const host::ResctrlL3* l3cat = nullptr;  // resctrl's L3 allocation rules
};

// How `profile show` prints a key as text (JSON always has the value).
enum class ShowAs {
  Json,    // the JSON value
  Hex,     // an unsigned number in hex (MSR addresses and bits)
  Hidden,  // not in the key list (shown another way, e.g. hardware notes)
};

// One key of a section, over the whole Profile.
struct SectionKey {
  std::string name;
  std::function<void(KeyReader&, Profile&)> read;
  std::function<nlohmann::json(const Profile&)> show;
  ShowAs as = ShowAs::Json;
};

struct Section {
  std::string name;  // the TOML table
  std::vector<SectionKey> keys;
  // Checks across keys, and against other sections: run on every load.
  std::function<void(const Profile&, Checker&)> check;
  // Checks against what is known of a host (CheckHost's null members are not).
  std::function<void(const Profile&, const CheckHost&, Checker&)> check_host;

  std::vector<std::string> key_names() const;
  // Reads the section's table (unknown keys are errors).
  void read(KeyReader& r, Profile& p) const;
  nlohmann::json show(const Profile& p) const;
};

// The keys of a struct T, each described once; a Section is made from them
// and where T lives in the Profile (section_of below).
template <class T>
class Keys {
 public:
  struct Key {
    std::string name;
    std::function<void(KeyReader&, const char* key, T&)> read;
    std::function<nlohmann::json(const T&)> show;
    ShowAs as = ShowAs::Json;
  };

  Keys& flag(const char* key, bool T::*m) {
    return add(
        key, [m](KeyReader& r, const char* k, T& t) { r.get(k, t.*m); }, value_of(m));
  }
  template <class Int>
  Keys& integer(const char* key, Int T::*m, int64_t lo, int64_t hi, ShowAs as = ShowAs::Json) {
    return add(
        key, [m, lo, hi](KeyReader& r, const char* k, T& t) { r.get_int(k, t.*m, lo, hi); },
        value_of(m), as);
  }
  Keys& number(const char* key, double T::*m, double lo, double hi) {
    return add(
        key, [m, lo, hi](KeyReader& r, const char* k, T& t) { r.get(k, t.*m, lo, hi); },
        value_of(m));
  }
  Keys& choice(const char* key, std::string T::*m, std::vector<std::string> allowed) {
    return add(
        key, [m, allowed](KeyReader& r, const char* k, T& t) { r.get(k, t.*m, allowed); },
        value_of(m));
  }
  Keys& identifier(const char* key, std::string T::*m) {
    return add(
        key, [m](KeyReader& r, const char* k, T& t) { r.get_identifier(k, t.*m); }, value_of(m));
  }
  Keys& text(const char* key, std::string T::*m, size_t max_len) {
    return add(
        key, [m, max_len](KeyReader& r, const char* k, T& t) { r.get_text(k, t.*m, max_len); },
        value_of(m));
  }
  Keys& texts(const char* key, std::vector<std::string> T::*m, size_t max_items, size_t max_len,
              ShowAs as = ShowAs::Json) {
    return add(
        key,
        [m, max_items, max_len](KeyReader& r, const char* k, T& t) {
          r.get_texts(k, t.*m, max_items, max_len);
        },
        value_of(m), as);
  }
  Keys& path(const char* key, std::string T::*m, std::string dir, std::string ext,
             std::string example) {
    return add(
        key,
        [m, dir, ext, example](KeyReader& r, const char* k, T& t) {
          r.get_path(k, t.*m, dir, ext, example);
        },
        value_of(m));
  }
  Keys& ints(const char* key, std::vector<int> T::*m, int64_t lo, int64_t hi) {
    return add(
        key, [m, lo, hi](KeyReader& r, const char* k, T& t) { r.get(k, t.*m, lo, hi); },
        value_of(m));
  }
  Keys& cpulist(const char* key, std::vector<int> T::*m);  // shown as a CPU list string
  Keys& cbm(const char* key, std::string T::*m) {
    return add(
        key, [m](KeyReader& r, const char* k, T& t) { r.get_cbm(k, t.*m); }, value_of(m));
  }
  Keys& freq(const char* key, std::string T::*m) {
    return add(
        key, [m](KeyReader& r, const char* k, T& t) { r.get_freq(k, t.*m); }, value_of(m));
  }
  // An array of tables ([[section.key]]) of E, each entry read with `entry`'s
  // keys and then `finish` (what an entry as a whole must have). An array in
  // a file replaces the inherited one.
  template <class E>
  Keys& tables(const char* key, std::vector<E> T::*m, Keys<E> entry, const char* example,
               std::type_identity_t<std::function<void(KeyReader&, const E&)>> finish = {}) {
    auto read = [m, entry, example, finish](KeyReader& r, const char* k, T& t) {
      if (!r.has(k)) return;
      std::vector<E> out;
      bool is_tables = r.each_table(k, example, [&](KeyReader& x) {
        E e;
        entry.read(x, e);
        if (finish) finish(x, e);
        out.push_back(std::move(e));
      });
      if (is_tables) t.*m = std::move(out);
    };
    auto show = [m, entry](const T& t) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : t.*m) a.push_back(entry.show(e));
      return a;
    };
    return add(key, std::move(read), std::move(show));
  }
  // A key no helper above fits: `read` and `show` spell its form themselves.
  Keys& custom(const char* key, std::function<void(KeyReader&, const char* key, T&)> read,
               std::function<nlohmann::json(const T&)> show, ShowAs as = ShowAs::Json) {
    return add(key, std::move(read), std::move(show), as);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& k : keys_) out.push_back(k.name);
    return out;
  }
  void read(KeyReader& r, T& t) const {
    r.known(names());
    for (const auto& k : keys_) k.read(r, k.name.c_str(), t);
  }
  nlohmann::json show(const T& t) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& k : keys_) j[k.name] = k.show(t);
    return j;
  }
  const std::vector<Key>& list() const { return keys_; }

 private:
  template <class M>
  static std::function<nlohmann::json(const T&)> value_of(M T::*m) {
    return [m](const T& t) { return nlohmann::json(t.*m); };
  }
  Keys& add(const char* key, std::function<void(KeyReader&, const char*, T&)> read,
            std::function<nlohmann::json(const T&)> show, ShowAs as = ShowAs::Json) {
    keys_.push_back({key, std::move(read), std::move(show), as});
    return *this;
  }
  std::vector<Key> keys_;
};

template <class T>
Keys<T>& Keys<T>::cpulist(const char* key, std::vector<int> T::*m) {
  return add(
      key, [m](KeyReader& r, const char* k, T& t) { r.get_cpulist(k, t.*m); },
      [m](const T& t) { return nlohmann::json(common::format_cpulist(t.*m)); });
}

// Where a section's T lives in a Profile.
template <class T>
struct SlotOf {
  std::function<T&(Profile&)> get;
  std::function<const T&(const Profile&)> get_const;
};

// A section stored in a field of Profile (`&Profile::bios`).
template <class T>
SlotOf<T> field(T Profile::*m) {
  return {[m](Profile& p) -> T& { return p.*m; },
          [m](const Profile& p) -> const T& { return p.*m; }};
}

// The checks of a section over T: on every load, and against a host.
template <class T>
using CheckOf = std::type_identity_t<std::function<void(const T&, const Profile&, Checker&)>>;
template <class T>
using CheckHostOf =
    std::type_identity_t<std::function<void(const T&, const Profile&, const CheckHost&, Checker&)>>;

// A section kept in Profile::extra under its name: a step whose parameters
// nothing outside its own file reads needs no field in Profile.
template <class T>
SlotOf<T> extra(const std::string& name) {
  return {[name](Profile& p) -> T& { return p.extra.get<T>(name); },
          [name](const Profile& p) -> const T& { return p.extra.get<T>(name); }};
}

template <class T>
Section section_of(std::string name, SlotOf<T> slot, Keys<T> keys, CheckOf<T> check = {},
                   CheckHostOf<T> check_host = {}) {
  Section s;
  s.name = std::move(name);
  for (const auto& k : keys.list()) {
    s.keys.push_back({k.name,
                      [slot, read = k.read, name = k.name](KeyReader& r, Profile& p) {
                        read(r, name.c_str(), slot.get(p));
                      },
                      [slot, show = k.show](const Profile& p) { return show(slot.get_const(p)); },
                      k.as});
  }
  if (check)
    s.check = [slot, f = check](const Profile& p, Checker& c) { f(slot.get_const(p), p, c); };
  if (check_host)
    s.check_host = [slot, f = check_host](const Profile& p, const CheckHost& h, Checker& c) {
      f(slot.get_const(p), p, h, c);
    };
  return s;
}

// What the loader knows of one step of the stack. lib/profile cannot see
// lib/stack, so the step registry (stack/steps.hpp) registers one for every
// step it holds: a program that loads profiles links the stack's steps.
struct StepSchema {
  int number = 0;
  std::string name;
  // The step changes the host: the bench measures it, and [expectations]
  // takes its name as a key.
  bool measured = false;
  std::optional<Section> section;  // [name], when the step has parameters
};

// Throws std::logic_error when the number, the name or the section's name is
// taken.
void register_step_schema(StepSchema s);
// By number. Complete once main() runs (steps register during static
// initialisation): not for use from another static initialiser.
const std::vector<StepSchema>& step_schemas();

}  // namespace epyctune::profile
