#include "http/server.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <stdexcept>

#include "http/server_impl.hpp"

namespace epyctune::http {
namespace {

Reply default_error_reply(int status, const std::string& message) {
  std::string esc;
  for (char c : message) {
    if (c == '"' || c == '\\') {
      esc += '\\';
      esc += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      esc += ' ';
    } else {
      esc += c;
    }
  }
  Reply r;
  r.status = status;
  r.body = "{\"error\":{\"message\":\"" + esc + "\",\"code\":" + std::to_string(status) + "}}";
  return r;
}

}  // namespace

Server::Impl::Impl(Limits l, Handler h, ErrorReply e)
    : limits(l), handler(std::move(h)), error_reply(e ? std::move(e) : default_error_reply) {
  validate(limits);
}

void Server::Impl::do_accept() {
  acceptor.async_accept(
      [this](const boost::system::error_code& ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

void Server::Impl::on_accept(const boost::system::error_code& ec, tcp::socket s) {
  if (closing || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors or memory: try again shortly rather than spin.
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([this](const boost::system::error_code& e) {
      if (!e && !closing) do_accept();
    });
    return;
  }
  ++accepted;
  if (conns.size() >= limits.max_connections && !evict_idle()) {
    refuse(s);
  } else {
    const std::uint64_t id = next_id++;
    auto c = std::make_shared<Connection>(*this, id, std::move(s));
    conns.emplace(id, c);
    open = conns.size();
    c->start();
  }
  do_accept();
}

// At the cap with nobody idle to close: one 503 written without waiting,
// then the connection closes. The ones already served are not disturbed.
void Server::Impl::refuse(tcp::socket& s) {
  ++refused;
  Reply r = error_reply(503, "the server is at its connection limit (" +
                                 std::to_string(limits.max_connections) + "); retry later");
  r.headers.push_back({"Retry-After", "1"});
  const std::string bytes = format_head(r, r.body.size(), 11, false) + r.body;
  boost::system::error_code ec;
  s.non_blocking(true, ec);
  s.write_some(net::buffer(bytes), ec);
  s.shutdown(tcp::socket::shutdown_both, ec);
  s.close(ec);
}

// Closes the connection idle the longest, if any: it holds nothing and loses
// nothing but the keep-alive (clients reconnect).
bool Server::Impl::evict_idle() {
  std::shared_ptr<Connection> oldest;
  for (const auto& [id, c] : conns)
    if (c->idle() && (!oldest || c->idle_since() < oldest->idle_since())) oldest = c;
  if (!oldest) return false;
  ++evicted;
  oldest->close();
  return true;
}

void Server::Impl::remove(std::uint64_t id) {
  conns.erase(id);
  open = conns.size();
}

void Server::Impl::drain() {
  draining = true;
  boost::system::error_code ec;
  acceptor.close(ec);
  auto all = conns;
  bool any = false;
  for (auto& [id, c] : all) {
    if (c->replying())
      any = true;
    else
      c->close();
  }
  busy = any;
}

void Server::Impl::close_all() {
  closing = true;
  boost::system::error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
  auto all = conns;  // close() erases from conns
  for (auto& [id, c] : all) c->close();
}

Server::Server(Limits limits, Handler handler, ErrorReply error_reply)
    : impl_(std::make_shared<Impl>(limits, std::move(handler), std::move(error_reply))) {}

Server::~Server() {
  stop();
}

int Server::bind(const std::string& host, int port) {
  auto& a = impl_->acceptor;
  const std::string where = host + ":" + std::to_string(port);
  boost::system::error_code ec;
  net::ip::address addr = net::ip::make_address(host, ec);
  if (ec) {
    tcp::resolver res(impl_->ioc);
    auto found = res.resolve(host, std::to_string(port), ec);
    if (ec || found.empty())
      throw std::runtime_error("cannot bind " + where + ": " + host + " is not an address (" +
                               ec.message() + ")");
    addr = found.begin()->endpoint().address();
  }
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  a.open(ep.protocol(), ec);
  if (!ec) {
    // SO_REUSEADDR only (a restart need not wait out TIME_WAIT); never
    // SO_REUSEPORT, which would let a second server share the port.
    a.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignore;
    a.close(ignore);
    throw std::runtime_error("cannot bind " + where + ": " + ec.message() +
                             (ec == net::error::address_in_use
                                  ? " (another process listens there; stop it or pick --port)"
                                  : ""));
  }
  return a.local_endpoint().port();
}

void Server::start() {
  auto& s = *impl_;
  if (s.io.joinable() || s.stopped) return;
  s.pool.emplace(s.limits.handler_threads);
  net::post(s.ioc, [impl = impl_.get()] { impl->do_accept(); });
  s.io = std::thread([impl = impl_.get()] {
    auto guard = net::make_work_guard(impl->ioc);
    impl->ioc.run();
  });
}

void Server::stop(std::chrono::milliseconds grace) {
  auto& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (!s.io.joinable()) return;
  const auto until = Clock::now() + grace;
  s.busy = true;
  do {
    net::post(s.ioc, [impl = impl_.get()] { impl->drain(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (s.busy && Clock::now() < until);
  net::post(s.ioc, [impl = impl_.get()] { impl->close_all(); });
  // Handlers still running post their replies back; each finds its
  // connection closed and cancels its producer.
  s.pool->join();
  net::post(s.ioc, [impl = impl_.get()] {
    impl->close_all();
    impl->ioc.stop();
  });
  s.io.join();
}

ServerStats Server::stats() const {
  const auto& s = *impl_;
  return {s.open.load(),      s.accepted.load(),  s.refused.load(),  s.evicted.load(),
          s.timed_out.load(), s.too_large.load(), s.malformed.load()};
}

}  // namespace epyctune::http
