#include "http/message.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <stdexcept>

#include "http/beast_parser.hpp"

namespace epyctune::http {

void validate(const Limits& l) {
  auto need = [](bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(what);
  };
  need(l.max_connections >= 1, "max_connections must be at least 1");
  need(l.header_bytes >= 512, "header_bytes must be at least 512");
  need(l.header_bytes <= (64u << 20), "header_bytes must be at most 64 MiB");
  need(l.body_bytes <= (1ull << 32), "body_bytes must be at most 4 GiB");
  need(l.header_deadline.count() > 0 && l.body_deadline.count() > 0 && l.idle.count() > 0 &&
           l.write_deadline.count() > 0,
       "deadlines must be positive");
  need(l.max_pending_output >= 4096, "max_pending_output must be at least 4096");
  need(l.handler_threads >= 1, "handler_threads must be at least 1");
}

std::optional<std::string_view> Request::header(std::string_view lower_name) const {
  for (const auto& h : headers)
    if (h.name == lower_name) return std::string_view(h.value);
  return std::nullopt;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string format_head(const Reply& r, std::optional<std::size_t> length, int version,
                        bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(r.status) + " ";
  h += reason_phrase(r.status);
  h += "\r\nServer: epyctune\r\n";
  if (!r.content_type.empty()) h += "Content-Type: " + r.content_type + "\r\n";
  if (length)
    h += "Content-Length: " + std::to_string(*length) + "\r\n";
  else if (version >= 11)
    h += "Transfer-Encoding: chunked\r\n";
  // HTTP/1.1 keeps the connection unless told; HTTP/1.0 closes unless told.
  if (!keep_alive)
    h += "Connection: close\r\n";
  else if (version < 11)
    h += "Connection: keep-alive\r\n";
  for (const auto& x : r.headers) h += x.name + ": " + x.value + "\r\n";
  h += "\r\n";
  return h;
}

std::string format_chunk(std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string c(size, static_cast<std::size_t>(n));
  c.append(data);
  c += "\r\n";
  return c;
}

namespace detail {

void configure(RequestParser& p, const Limits& l) {
  p.header_limit(static_cast<std::uint32_t>(l.header_bytes));
  p.body_limit(static_cast<std::uint64_t>(l.body_bytes));
  p.eager(true);
}

Request take_request(RequestParser& p) {
  auto m = p.release();
  Request r;
  r.method = std::string(m.method_string());
  r.target = std::string(m.target());
  const auto q = r.target.find('?');
  r.path = r.target.substr(0, q);
  if (q != std::string::npos) r.query = r.target.substr(q + 1);
  r.version = m.version() >= 11 ? 11 : 10;
  r.keep_alive = m.keep_alive();
  for (const auto& f : m) {
    std::string name(f.name_string());
    for (auto& c : name)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    r.headers.push_back({std::move(name), std::string(f.value())});
  }
  r.body = std::move(m.body());
  return r;
}

ReadFailure failure_for(const boost::beast::error_code& ec, bool in_header, const Limits& l) {
  namespace e = bhttp;
  if (ec == e::error::header_limit || (in_header && ec == e::error::buffer_overflow))
    return {431,
            "the request line and headers are over " + std::to_string(l.header_bytes) + " bytes"};
  if (ec == e::error::body_limit || ec == e::error::buffer_overflow)
    return {413, "the request body is over " + std::to_string(l.body_bytes) + " bytes"};
  if (ec == e::error::bad_version) return {505, "only HTTP/1.0 and HTTP/1.1 are served"};
  if (ec == e::error::bad_transfer_encoding)
    return {501, "the only transfer encoding accepted is chunked"};
  return {400, "malformed HTTP request: " + ec.message()};
}

}  // namespace detail

ParseResult parse_one(std::string_view bytes, const Limits& limits) {
  ParseResult out;
  detail::RequestParser p;
  detail::configure(p, limits);
  boost::beast::error_code ec;
  while (!p.is_done()) {
    const std::string_view rest = bytes.substr(out.consumed);
    if (rest.empty()) return out;  // mid-request
    const std::size_t n = p.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    if (ec == detail::bhttp::error::need_more) {
      // Beast wants the whole header in one buffer: the rest is all there is.
      return out;
    }
    if (ec) {
      out.failure = detail::failure_for(ec, !p.is_header_done(), limits);
      return out;
    }
    out.consumed += n;
    if (n == 0 && !p.is_done()) return out;
  }
  out.request = detail::take_request(p);
  return out;
}

}  // namespace epyctune::http
