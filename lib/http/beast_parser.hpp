// Internal to lib/http: the one Beast request parser setup that the server,
// parse_one() and so the fuzz target share.
#pragma once

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/message.hpp"

namespace epyctune::http::detail {

namespace bhttp = boost::beast::http;
using RequestParser = bhttp::request_parser<bhttp::string_body>;

// Header and body limits on a fresh parser. Beast checks the body limit
// against Content-Length at the header, and against each chunk's declared
// size before its data is read, so no encoding buffers past it.
void configure(RequestParser& p, const Limits& l);

// Takes the parsed message out of a parser that is done.
Request take_request(RequestParser& p);

// What a parse error is answered with. in_header: the error came before the
// headers were complete (a buffer overflow is then 431, else 413).
ReadFailure failure_for(const boost::beast::error_code& ec, bool in_header, const Limits& l);

}  // namespace epyctune::http::detail
