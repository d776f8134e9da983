// Internal to lib/http: the server's shared state and one connection's
// state machine. Everything here runs on the single I/O thread, except the
// handler (on the pool) and a producer's wake (any thread).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "http/beast_parser.hpp"
#include "http/server.hpp"

namespace epyctune::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

class Connection;

struct Server::Impl {
  Impl(Limits l, Handler h, ErrorReply e);

  Limits limits;
  Handler handler;
  ErrorReply error_reply;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::optional<net::thread_pool> pool;
  std::thread io;
  bool stopped = false;  // stop() ran (caller's thread)

  // I/O thread only.
  std::map<std::uint64_t, std::shared_ptr<Connection>> conns;
  std::uint64_t next_id = 1;
  bool closing = false;
  bool draining = false;          // replies end their connections; no new ones start
  std::atomic<bool> busy{false};  // a connection still replies (while draining)

  std::atomic<std::uint64_t> accepted{0}, refused{0}, evicted{0}, timed_out{0}, too_large{0},
      malformed{0}, open{0};

  void do_accept();
  void on_accept(const boost::system::error_code& ec, tcp::socket s);
  void refuse(tcp::socket& s);
  bool evict_idle();
  void remove(std::uint64_t id);
  void close_all();
  void drain();  // stop accepting, close the idle, note whether any is busy
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl& srv, std::uint64_t id, tcp::socket s);
  void start();
  // Closes at once: a running producer is cancelled. Idempotent.
  void close();
  // Between requests, nothing buffered, no reply running: holds nothing.
  bool idle() const;
  bool replying() const { return phase_ == Phase::handling || phase_ == Phase::replying; }
  Clock::time_point idle_since() const { return idle_since_; }

 private:
  enum class Phase { idle, header, body, handling, replying, lingering, closed };

  void process();
  void header_read();  // header done: the body phase starts
  void ensure_reading();
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void peer_left();
  void dispatch();
  void on_handled(Response r);
  void pump();
  void send_whole(const Reply& r);
  void fail(const ReadFailure& f);
  void queue(std::string bytes);
  void do_write();
  void on_write(const boost::system::error_code& ec);
  void reply_written(bool keep_alive);
  void finish_reply();
  void linger();
  void arm_read(std::chrono::milliseconds d);
  void disarm_read();
  void on_read_deadline();
  std::size_t read_room() const;
  std::function<void()> make_wake();

  Server::Impl& srv_;
  const std::uint64_t id_;
  tcp::socket sock_;
  boost::beast::flat_buffer buf_;
  std::optional<detail::RequestParser> parser_;
  net::steady_timer read_timer_, write_timer_;
  unsigned read_gen_ = 0;
  Phase phase_ = Phase::idle;
  bool reading_ = false, writing_ = false, peer_eof_ = false;
  std::deque<std::string> out_;
  std::size_t out_bytes_ = 0, in_write_ = 0;
  // The reply ends when `out_` drains; then the connection stays or goes.
  bool finish_pending_ = false, finish_keep_alive_ = false;
  std::shared_ptr<Producer> producer_;
  bool chunked_ = false, stream_keep_alive_ = false;
  int version_ = 11;
  bool keep_alive_ = true;
  Clock::time_point idle_since_ = Clock::now();
  std::atomic<bool> wake_pending_{false};
};

}  // namespace epyctune::http
