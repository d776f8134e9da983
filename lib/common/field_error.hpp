// A wrong value named by the field of the options struct that holds it
// ("draft_cpus"), never by a command-line flag: libraries do not know how
// their options were spelled. The app that parsed the flag maps the field
// back to it (and serve maps it to the request's JSON key).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace epyctune::common {

class FieldError : public std::invalid_argument {
 public:
  FieldError(std::string field, const std::string& message)
      : std::invalid_argument(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

}  // namespace epyctune::common
