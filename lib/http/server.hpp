// An HTTP/1.1 server that bounds what each client can make it hold.
//
// One I/O thread runs every connection as events (Boost.Asio), so an idle or
// slow client holds a few hundred bytes and no thread. Requests are read with
// Beast's parser under Limits: header and body size (any transfer
// encoding, checked while reading), and deadlines fixed when each phase
// starts. Complete requests go to the handler on a small pool of threads;
// its reply is whole, or produced over time by another thread (a Producer)
// and streamed: chunked to HTTP/1.1 clients, close-delimited to HTTP/1.0.
// Keep-alive and pipelined requests are served in order. The listening
// socket is bound without SO_REUSEPORT: a port in use is an error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/message.hpp"

namespace epyctune::http {

// A reply made over time on another thread (a completion being generated).
class Producer {
 public:
  virtual ~Producer() = default;
  // Called once, on the I/O thread, before take(): `wake` may then be called
  // from any thread, any number of times, when take() has something new.
  virtual void start(std::function<void()> wake) = 0;
  struct Part {
    std::optional<Reply> head;  // first: the status and headers
    bool streamed = false;      // with head: the body follows in parts; else head.body is all
    std::string data;           // body bytes (streamed only)
    bool end = false;           // the reply is complete
  };
  // On the I/O thread, after a wake: what is ready now (maybe nothing).
  virtual Part take() = 0;
  // The client left, or the server stops, before the end. On the I/O thread,
  // at most once; no take() follows, and `wake` must not be called after.
  virtual void cancel() = 0;
};

// What a handler returns: a whole reply, or a producer.
struct Response {
  Reply reply;
  std::shared_ptr<Producer> producer;
};

// Runs on a handler thread with the complete request. An exception becomes
// a 500 reply.
using Handler = std::function<Response(const Request&)>;

// The body of the server's own refusals (408, 413, 431, 400, 503 at the
// connection cap, 500 for a handler that threw): status and message in, the
// reply out. The default is {"error": {"message", "type", "code"}}.
using ErrorReply = std::function<Reply(int status, const std::string& message)>;

struct ServerStats {
  std::uint64_t open = 0;       // connections now
  std::uint64_t accepted = 0;   // since start
  std::uint64_t refused = 0;    // answered 503 at the connection cap
  std::uint64_t evicted = 0;    // idle ones closed to make room
  std::uint64_t timed_out = 0;  // a deadline passed
  std::uint64_t too_large = 0;  // 413 or 431
  std::uint64_t malformed = 0;  // other 4xx/5xx from the parser
};

class Server {
 public:
  Server(Limits limits, Handler handler, ErrorReply error_reply = {});
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (0: a free port) and listens; returns the port. Throws
  // std::runtime_error naming the address, e.g. when the port is in use.
  int bind(const std::string& host, int port);
  // Serves on the I/O thread and the handler pool from now on.
  void start();
  // Closes the listener and the idle connections; gives replies under way
  // up to `grace` to end (a producer told to end by its owner sends its
  // last words), then closes every connection, cancelling the producers
  // left, and joins the threads. Safe to call more than once.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  ServerStats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace epyctune::http
