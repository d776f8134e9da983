// libFuzzer target: the control socket's request parser on arbitrary bytes
// (one line as the server hands it over), then the reply it would send,
// parsed back. A clean ProtocolError is a rejection; anything else (a crash,
// a sanitizer report, another exception, a broken invariant below) is a
// finding.
#include <cstdlib>
#include <string>

#include "control/protocol.hpp"

using namespace epyctune::control;
using nlohmann::json;

namespace {

// A reply line: one line, ending in '\n', a JSON object with the echoed id.
json parse_reply(const std::string& line, const json& id) {
  if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1) std::abort();
  json j = json::parse(line);  // throws (a finding) if the server wrote non-JSON
  if (!j.is_object() || j.size() != 3 || !j["ok"].is_boolean()) std::abort();
  if (j["id"] != id) std::abort();
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  json id;
  try {
    Request r = parse_request(line, &id);
    if (r.method.empty() || !r.params.is_object()) std::abort();
    if (!(r.id.is_null() || r.id.is_string() || r.id.is_number())) std::abort();
    access_needed(r.method);  // a method it accepted is a known one
    json back = parse_reply(ok_reply(r.id, r.params), r.id);
    if (back["ok"] != true || back["result"] != r.params) std::abort();
  } catch (const ProtocolError& e) {
    if (e.code() != code::parse_error && e.code() != code::invalid_request &&
        e.code() != code::too_large && e.code() != code::unknown_method)
      std::abort();
    json back = parse_reply(error_reply(id, e.code(), e.what()), id);
    if (back["ok"] != false || back["error"]["code"] != e.code()) std::abort();
  }
  return 0;
}
