#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <vector>

#include "http/server_impl.hpp"

namespace epyctune::http {
namespace {

// Bytes a connection may buffer ahead of the parser while a reply runs:
// pipelined requests wait there. Reading stops at the bound.
constexpr std::size_t kPipelineSlack = 16 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;
// After a refusal, the client's unread bytes are drained this long, so that
// it reads the refusal instead of a reset.
constexpr auto kLinger = std::chrono::milliseconds(2000);

}  // namespace

Connection::Connection(Server::Impl& srv, std::uint64_t id, tcp::socket s)
    : srv_(srv),
      id_(id),
      sock_(std::move(s)),
      buf_(srv.limits.header_bytes + srv.limits.body_bytes + kPipelineSlack),
      read_timer_(sock_.get_executor()),
      write_timer_(sock_.get_executor()) {}

void Connection::start() {
  boost::system::error_code ec;
  sock_.set_option(tcp::no_delay(true), ec);  // replies go out in several small writes
  // A new connection gets the header deadline for its first request: it has
  // not earned a keep-alive wait.
  arm_read(srv_.limits.header_deadline);
  ensure_reading();
}

bool Connection::idle() const {
  return phase_ == Phase::idle && buf_.size() == 0 && !producer_ && out_.empty();
}

std::size_t Connection::read_room() const {
  const auto& l = srv_.limits;
  std::size_t cap = 0;
  switch (phase_) {
    case Phase::idle:
    case Phase::header:
    case Phase::body:
      cap = l.header_bytes + l.body_bytes + kPipelineSlack;
      break;
    case Phase::handling:
    case Phase::replying:
      cap = l.header_bytes + kPipelineSlack;
      break;
    case Phase::lingering:
      return kReadChunk;  // discarded as it comes
    case Phase::closed:
      return 0;
  }
  return buf_.size() >= cap ? 0 : std::min(cap - buf_.size(), kReadChunk);
}

void Connection::ensure_reading() {
  if (reading_ || phase_ == Phase::closed || peer_eof_) return;
  const std::size_t room = read_room();
  if (room == 0) return;  // resumes when the reply ends and the parser takes bytes
  reading_ = true;
  sock_.async_read_some(buf_.prepare(room),
                        [self = shared_from_this()](const boost::system::error_code& ec,
                                                    std::size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(const boost::system::error_code& ec, std::size_t n) {
  reading_ = false;
  if (phase_ == Phase::closed) return;
  if (ec) {
    peer_left();
    return;
  }
  buf_.commit(n);
  if (phase_ == Phase::lingering) {
    buf_.consume(buf_.size());
  } else if (phase_ == Phase::idle || phase_ == Phase::header || phase_ == Phase::body) {
    process();
    return;
  }
  ensure_reading();
}

// EOF or an error on read: between requests or mid-request the connection
// just ends; while a completion runs, nobody is left to read it, so it is
// cancelled. A handler that is still running finds the connection closed.
void Connection::peer_left() {
  peer_eof_ = true;
  // A reply without a producer is quick: it still goes out, to a client that
  // only half-closed.
  if ((phase_ == Phase::handling || phase_ == Phase::replying) && !producer_) return;
  close();
}

void Connection::process() {
  const auto& l = srv_.limits;
  while (phase_ == Phase::idle || phase_ == Phase::header || phase_ == Phase::body) {
    if (buf_.size() == 0) break;
    if (phase_ == Phase::idle) {
      parser_.emplace();
      detail::configure(*parser_, l);
      phase_ = Phase::header;
      arm_read(l.header_deadline);
    }
    boost::beast::error_code ec;
    const std::size_t n = parser_->put(buf_.data(), ec);
    if (ec == detail::bhttp::error::need_more) {
      // Fed eagerly, the parser may finish a chunk's data and stop inside
      // the next chunk's size line: it then asks for more and has taken the
      // bytes before (they are the body's now), so they must not be fed again.
      buf_.consume(n);
      if (!parser_->is_header_done() && buf_.size() > l.header_bytes)
        return fail(detail::failure_for(detail::bhttp::error::header_limit, true, l));
      header_read();
      break;
    }
    if (ec) return fail(detail::failure_for(ec, !parser_->is_header_done(), l));
    buf_.consume(n);
    header_read();
    if (parser_->is_done()) return dispatch();
    if (n == 0) break;
  }
  ensure_reading();
}

// Once the parser has the whole header: the body's deadline, and the 100
// Continue that curl waits a second for before it sends a large body.
void Connection::header_read() {
  if (phase_ != Phase::header || !parser_->is_header_done()) return;
  phase_ = Phase::body;
  arm_read(srv_.limits.body_deadline);
  const auto& h = parser_->get();
  if (!parser_->is_done() && h.version() >= 11) {
    auto it = h.find(boost::beast::http::field::expect);
    if (it != h.end() && boost::beast::iequals(it->value(), "100-continue"))
      queue("HTTP/1.1 100 Continue\r\n\r\n");
  }
}

void Connection::dispatch() {
  Request req = detail::take_request(*parser_);
  parser_.reset();
  disarm_read();
  phase_ = Phase::handling;
  version_ = req.version;
  keep_alive_ = req.keep_alive;
  auto self = shared_from_this();
  net::post(*srv_.pool, [self, req = std::move(req)]() mutable {
    Response r;
    try {
      r = self->srv_.handler(req);
    } catch (const std::exception& e) {
      r = Response{self->srv_.error_reply(500, e.what()), nullptr};
    } catch (...) {
      r = Response{self->srv_.error_reply(500, "internal error"), nullptr};
    }
    net::post(self->sock_.get_executor(),
              [self, r = std::move(r)]() mutable { self->on_handled(std::move(r)); });
  });
  // Reading goes on: an end of stream now means the client left, and
  // pipelined requests wait in the buffer.
  ensure_reading();
}

void Connection::on_handled(Response r) {
  if (phase_ != Phase::handling) {
    if (r.producer) r.producer->cancel();  // a completion whose client has gone
    return;
  }
  phase_ = Phase::replying;
  if (!r.producer) return send_whole(r.reply);
  if (peer_eof_) {
    r.producer->cancel();
    return close();
  }
  producer_ = std::move(r.producer);
  producer_->start(make_wake());
  pump();
}

std::function<void()> Connection::make_wake() {
  std::weak_ptr<Connection> weak = weak_from_this();
  auto ex = sock_.get_executor();
  return [weak, ex] {
    auto c = weak.lock();
    if (!c || c->wake_pending_.exchange(true)) return;
    net::post(ex, [c] {
      c->wake_pending_ = false;
      c->pump();
    });
  };
}

void Connection::pump() {
  if (phase_ != Phase::replying || !producer_) return;
  Producer::Part part = producer_->take();
  if (part.head) {
    if (!part.streamed) {
      producer_.reset();
      return send_whole(*part.head);
    }
    // HTTP/1.0 has no chunks: the body ends where the connection does.
    chunked_ = version_ >= 11;
    stream_keep_alive_ = chunked_ && keep_alive_ && !srv_.draining;
    queue(format_head(*part.head, std::nullopt, version_, stream_keep_alive_));
  }
  if (!part.data.empty()) queue(chunked_ ? format_chunk(part.data) : std::move(part.data));
  if (part.end) {
    if (chunked_) queue(std::string(kLastChunk));
    producer_.reset();
    return reply_written(stream_keep_alive_);
  }
  if (out_bytes_ > srv_.limits.max_pending_output) close();  // it does not read: cut it
}

void Connection::send_whole(const Reply& r) {
  const bool keep = keep_alive_ && !peer_eof_ && !srv_.draining;
  queue(format_head(r, r.body.size(), version_, keep) + r.body);
  reply_written(keep);
}

void Connection::fail(const ReadFailure& f) {
  if (f.status == 408)
    ++srv_.timed_out;
  else if (f.status == 413 || f.status == 431)
    ++srv_.too_large;
  else
    ++srv_.malformed;
  parser_.reset();
  disarm_read();
  phase_ = Phase::replying;
  const Reply r = srv_.error_reply(f.status, f.message);
  // The stream's framing is lost: this reply is the last.
  queue(format_head(r, r.body.size(), 11, false) + r.body);
  reply_written(false);
}

void Connection::queue(std::string bytes) {
  if (phase_ == Phase::closed || bytes.empty()) return;
  out_bytes_ += bytes.size();
  out_.push_back(std::move(bytes));
  if (!writing_) do_write();
}

void Connection::do_write() {
  writing_ = true;
  in_write_ = out_.size();
  std::vector<net::const_buffer> bufs;
  bufs.reserve(in_write_);
  for (const auto& s : out_) bufs.emplace_back(s.data(), s.size());
  write_timer_.expires_after(srv_.limits.write_deadline);
  write_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto c = weak.lock()) c->close();  // a write made no way: the client does not read
  });
  net::async_write(sock_, bufs,
                   [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                     self->on_write(ec);
                   });
}

void Connection::on_write(const boost::system::error_code& ec) {
  writing_ = false;
  write_timer_.cancel();
  if (phase_ == Phase::closed) return;
  if (ec) return close();
  for (; in_write_ > 0; --in_write_) {
    out_bytes_ -= out_.front().size();
    out_.pop_front();
  }
  if (!out_.empty()) return do_write();
  if (finish_pending_) finish_reply();
}

void Connection::reply_written(bool keep_alive) {
  finish_pending_ = true;
  finish_keep_alive_ = keep_alive;
  if (!writing_ && out_.empty()) finish_reply();
}

void Connection::finish_reply() {
  finish_pending_ = false;
  if (!finish_keep_alive_ || peer_eof_ || srv_.draining) return linger();
  phase_ = Phase::idle;
  idle_since_ = Clock::now();
  if (buf_.size() == 0 && buf_.capacity() > 64 * 1024) buf_.shrink_to_fit();
  arm_read(srv_.limits.idle);
  if (buf_.size() > 0)
    process();  // a pipelined request
  else
    ensure_reading();
}

// Half-closes and reads what the client still sends, for a little while, so
// that closing with unread bytes does not reset the connection before the
// client has read the reply.
void Connection::linger() {
  if (phase_ == Phase::closed) return;
  if (peer_eof_) return close();
  phase_ = Phase::lingering;
  boost::system::error_code ec;
  sock_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  buf_.consume(buf_.size());
  arm_read(std::chrono::duration_cast<std::chrono::milliseconds>(kLinger));
  ensure_reading();
}

void Connection::arm_read(std::chrono::milliseconds d) {
  const unsigned gen = ++read_gen_;
  read_timer_.expires_after(d);
  read_timer_.async_wait([weak = weak_from_this(), gen](const boost::system::error_code& ec) {
    auto c = weak.lock();
    if (ec || !c || gen != c->read_gen_) return;
    c->on_read_deadline();
  });
}

void Connection::disarm_read() {
  ++read_gen_;
  read_timer_.cancel();
}

void Connection::on_read_deadline() {
  switch (phase_) {
    case Phase::header:
      return fail({408, "the request's headers did not arrive within " +
                            std::to_string(srv_.limits.header_deadline.count()) + " ms"});
    case Phase::body:
      return fail({408, "the request's body did not arrive within " +
                            std::to_string(srv_.limits.body_deadline.count()) + " ms"});
    case Phase::idle:
      if (buf_.size() == 0) return close();  // an idle keep-alive connection ends quietly
      return fail({408, "the request did not arrive in time"});
    default:
      return close();
  }
}

void Connection::close() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  ++read_gen_;
  boost::system::error_code ec;
  read_timer_.cancel();
  write_timer_.cancel();
  if (producer_) {
    producer_->cancel();
    producer_.reset();
  }
  sock_.shutdown(tcp::socket::shutdown_both, ec);
  sock_.close(ec);
  out_.clear();
  out_bytes_ = 0;
  srv_.remove(id_);
}

}  // namespace epyctune::http
