// The HTTP server's vocabulary: its limits, a parsed request, a reply, and
// how a reply is framed on the wire for the client's HTTP version.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace epyctune::http {

// Every resource a client can make the server hold is bounded here.
struct Limits {
  std::size_t max_connections = 256;     // beyond: the longest-idle one goes, else 503
  std::size_t header_bytes = 16 * 1024;  // request line and headers (431 beyond)
  std::size_t body_bytes = 1 << 20;      // after de-chunking, any encoding (413 beyond)
  // From a request's first byte to its last header, and from there to the
  // body's last byte: fixed when the phase starts, so trickled bytes cannot
  // extend them (408 when they pass).
  std::chrono::milliseconds header_deadline{10'000};
  std::chrono::milliseconds body_deadline{30'000};
  std::chrono::milliseconds idle{15'000};  // keep-alive wait for the next request
  // A write that does not finish within this: the client does not read.
  std::chrono::milliseconds write_deadline{30'000};
  // A streamed reply's bytes waiting for a slow reader; beyond, it is cut.
  std::size_t max_pending_output = 4 << 20;
  std::size_t handler_threads = 2;
};

// Checks the limits' own sanity; throws std::invalid_argument naming the field.
void validate(const Limits& l);

struct Header {
  std::string name;  // lower-case
  std::string value;
};

struct Request {
  std::string method;  // as sent, e.g. "POST"
  std::string target;  // path and query as sent
  std::string path;    // target before '?'
  std::string query;   // after '?', "" when none
  int version = 11;    // 10 or 11
  bool keep_alive = true;
  std::vector<Header> headers;
  std::string body;

  // The first header of that (lower-case) name, or nullopt.
  std::optional<std::string_view> header(std::string_view lower_name) const;
};

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<Header> headers;  // extra headers (names as they are to be sent)
  std::string body;
};

// "OK", "Not Found", ...; "Unknown" for a code without a standard phrase.
std::string_view reason_phrase(int status);

// The status line and headers of a reply. length: the body's length, or
// nullopt for a streamed body (chunked to HTTP/1.1 clients, delimited by the
// connection's close for HTTP/1.0). keep_alive: whether the connection stays.
std::string format_head(const Reply& r, std::optional<std::size_t> length, int version,
                        bool keep_alive);
// One chunk of a chunked body ("" is not allowed: that is the last chunk).
std::string format_chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// Why a request could not be read, as the reply it gets (always with the
// connection closed after it): 400, 408, 413, 431, 501.
struct ReadFailure {
  int status;
  std::string message;
};

// Parses exactly what the server parses (same parser, same limits) from a
// complete buffer: the first request in `bytes`, or the failure it would be
// answered with. `consumed` gets the bytes it took (the next pipelined
// request starts there). For tests and the fuzz target.
struct ParseResult {
  std::optional<Request> request;
  std::optional<ReadFailure> failure;  // neither set: the bytes end mid-request
  std::size_t consumed = 0;
};
ParseResult parse_one(std::string_view bytes, const Limits& limits);

}  // namespace epyctune::http
