// The TCP rendezvous (Boost.Asio): rank 0 listens on the port and answers each of the world-1 ranks that
// connect with {magic, world, length} and the bytes; the others connect (retrying until rank 0 listens) and
// read. Every step runs asynchronously under one deadline, so nothing waits past the timeout.
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without including it

#include <boost/asio.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/distributed/rendezvous.hpp"

namespace lab {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Header = std::array<uint32_t, 3>;  // magic, world, payload length (host order: one cluster, one ABI)
constexpr uint32_t kMagic = 0x4c414231;  // "LAB1"
constexpr auto kRetry = std::chrono::milliseconds(100);

struct Address {
  std::string host;
  std::string port;
};

Address parse(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  const std::string port = colon == std::string::npos ? "" : host_port.substr(colon + 1);
  const bool digits =
      !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || colon == std::string::npos || !digits || std::stoi(port) < 1 || std::stoi(port) > 65535)
    throw UsageError("--master '" + host_port + "': expected host:port with a port from 1 to 65535");
  return {host_port.substr(0, colon), port};
}

class TcpRendezvous : public Rendezvous {
 public:
  TcpRendezvous(std::string host_port, double timeout_seconds)
      : text_(std::move(host_port)), address_(parse(text_)), timeout_(timeout_seconds) {}

  std::vector<uint8_t> exchange(int rank, int world, const std::vector<uint8_t>& bytes_of_rank0) override {
    if (world <= 1) return bytes_of_rank0;
    deadline_ =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
    if (rank == 0) {
      serve(world, bytes_of_rank0);
      return bytes_of_rank0;
    }
    return fetch(world);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw RuntimeError("--master " + text_ + ": " + why);
  }

  std::string timed_out(const std::string& what) const {
    std::ostringstream seconds;
    seconds << timeout_;
    return "rendezvous timed out after " + seconds.str() + " s (" + what + ")";
  }

  // Runs the io_context until `done` or the deadline.
  bool run_until(asio::io_context& io, const bool& done) const {
    while (!done && Clock::now() < deadline_) {
      io.restart();
      io.run_for(std::chrono::milliseconds(50));
    }
    return done;
  }

  void serve(int world, const std::vector<uint8_t>& bytes) {
    asio::io_context io;
    tcp::acceptor acceptor(io);
    boost::system::error_code ec;
    const tcp::endpoint any(tcp::v4(), uint16_t(std::stoi(address_.port)));
    acceptor.open(any.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(any, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) fail("rank 0 cannot listen on port " + address_.port + " (" + ec.message() + ")");

    const Header header = {kMagic, uint32_t(world), uint32_t(bytes.size())};
    int accepted = 0, served = 0;
    bool done = false;
    std::string error;
    std::function<void()> accept_next = [&] {
      acceptor.async_accept([&](const boost::system::error_code& e, tcp::socket socket) {
        if (e) {
          error = e.message();
          done = true;
          return;
        }
        auto peer = std::make_shared<tcp::socket>(std::move(socket));
        const std::array<asio::const_buffer, 2> message = {asio::buffer(header), asio::buffer(bytes)};
        asio::async_write(*peer, message, [&, peer](const boost::system::error_code& w, size_t) {
          if (w) error = w.message();
          if (w || ++served == world - 1) done = true;
        });
        if (++accepted < world - 1) accept_next();
      });
    };
    accept_next();
    if (!run_until(io, done))
      fail(timed_out(std::to_string(served) + " of " + std::to_string(world - 1) + " ranks were served"));
    if (!error.empty()) fail("serving the ranks: " + error);
  }

  std::vector<uint8_t> fetch(int world) {
    asio::io_context io;
    tcp::resolver resolver(io);
    std::string last = "rank 0 is not listening";
    for (;;) {
      boost::system::error_code ec;
      const tcp::resolver::results_type endpoints = resolver.resolve(address_.host, address_.port, ec);
      if (ec) fail("cannot resolve " + address_.host + " (" + ec.message() + ")");
      tcp::socket socket(io);
      Header header{};
      std::vector<uint8_t> bytes;
      bool done = false;
      boost::system::error_code failure;
      asio::async_connect(socket, endpoints, [&](const boost::system::error_code& c, const tcp::endpoint&) {
        if (c) {
          failure = c;
          done = true;
          return;
        }
        asio::async_read(socket, asio::buffer(header), [&](const boost::system::error_code& r, size_t) {
          if (r || header[0] != kMagic || header[2] > (1u << 20)) {
            failure = r ? r : asio::error::invalid_argument;
            done = true;
            return;
          }
          bytes.resize(header[2]);
          asio::async_read(socket, asio::buffer(bytes), [&](const boost::system::error_code& p, size_t) {
            failure = p;
            done = true;
          });
        });
      });
      if (!run_until(io, done)) fail(timed_out(last));
      if (!failure) {
        if (int(header[1]) != world)
          fail("rank 0 runs " + std::to_string(header[1]) + " processes, this one " + std::to_string(world));
        return bytes;
      }
      last = failure.message();
      if (failure == asio::error::invalid_argument) fail("rank 0 did not answer as a lab rendezvous");
      std::this_thread::sleep_for(std::min<Clock::duration>(kRetry, deadline_ - Clock::now()));
    }
  }

  std::string text_;
  Address address_;
  double timeout_;
  Clock::time_point deadline_;
};

}  // namespace

std::unique_ptr<Rendezvous> make_tcp_rendezvous(const std::string& host_port, double timeout_seconds) {
  return std::make_unique<TcpRendezvous>(host_port, timeout_seconds);
}

}  // namespace lab
