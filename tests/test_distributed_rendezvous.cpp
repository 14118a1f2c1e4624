// The rendezvous that carries NCCL's unique id between processes: the file one between two threads and two
// processes (fork), its missing, garbled and mismatched files and its timeouts as one-line errors; the TCP
// one over localhost between two threads, its timeouts and a malformed address.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without including it

#include <boost/asio.hpp>

#include <future>
#include <random>

#include <sys/wait.h>
#include <unistd.h>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/distributed/rendezvous.hpp"
#include "tests/error_message.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::test::contains;
using lab::test::error_message;

namespace {

std::vector<uint8_t> seeded_id() {  // 128 bytes, like an NCCL unique id
  std::mt19937 engine(128);
  std::vector<uint8_t> id(128);
  for (uint8_t& b : id) b = uint8_t(engine());
  return id;
}

// Rank 0 and rank 1 of a two-process rendezvous on two threads; returns what each received.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> exchange_on_two_threads(lab::Rendezvous& zero,
                                                                              lab::Rendezvous& one) {
  auto first = std::async(std::launch::async, [&] { return one.exchange(1, 2, {}); });
  std::vector<uint8_t> of_zero = zero.exchange(0, 2, seeded_id());
  return {of_zero, first.get()};
}

// A localhost port nobody listens on right now (the kernel's choice for an ephemeral bind).
std::string free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::tcp::v4(), 0});
  return std::to_string(probe.local_endpoint().port());
}

}  // namespace

TEST_CASE("file rendezvous: two threads agree on rank 0's bytes, and the file is gone afterwards",
          "[distributed]") {
  lab::test::ScratchDir dir("rendezvous-threads");
  const fs::path file = dir.path / "id";
  auto zero = lab::make_file_rendezvous(file, 20), one = lab::make_file_rendezvous(file, 20);
  const auto [of_zero, of_one] = exchange_on_two_threads(*zero, *one);
  CHECK(of_zero == seeded_id());
  CHECK(of_one == seeded_id());
  CHECK(fs::is_empty(dir.path));  // the id file and the acknowledgement removed by rank 0
}

TEST_CASE("file rendezvous: two processes agree on rank 0's bytes", "[distributed]") {
  lab::test::ScratchDir dir("rendezvous-processes");
  const fs::path file = dir.path / "id";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 1: exit status 0 when it received rank 0's bytes
    int status = 3;
    try {
      status = lab::make_file_rendezvous(file, 20)->exchange(1, 2, {}) == seeded_id() ? 0 : 1;
    } catch (...) {
      status = 2;
    }
    _exit(status);
  }
  const std::vector<uint8_t> mine = lab::make_file_rendezvous(file, 20)->exchange(0, 2, seeded_id());
  int status = -1;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(mine == seeded_id());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE(
    "file rendezvous: a missing, garbled or mismatched file, and rank 0 left alone, are one-line errors",
    "[distributed]") {
  lab::test::ScratchDir dir("rendezvous-errors");
  const fs::path file = dir.path / "id";
  SECTION("nobody writes the file") {
    CHECK(error_message<lab::RuntimeError>([&] {
            lab::make_file_rendezvous(file, 0.2)->exchange(1, 2, {});
          }) == file.string() + ": rendezvous timed out after 0.2 s (rank 0 did not write it)");
  }
  SECTION("a garbled file") {
    lab::test::write_file(file, "lab-rendezvous 1 2\nnot hex\n");
    CHECK(error_message<lab::UsageError>([&] { lab::make_file_rendezvous(file, 5)->exchange(1, 2, {}); }) ==
          file.string() +
              ": not a lab rendezvous file (expected \"lab-rendezvous 1 <processes>\" and a hex line, as "
              "rank 0 "
              "writes it)");
  }
  SECTION("a file of another run size") {
    lab::test::write_file(file, "lab-rendezvous 1 4\n00ff\n");
    CHECK(error_message<lab::UsageError>([&] { lab::make_file_rendezvous(file, 5)->exchange(1, 2, {}); }) ==
          file.string() + ": rank 0 wrote it for 4 processes, this one is of 2");
  }
  SECTION("rank 0 ignores an acknowledgement a killed run left") {
    lab::test::write_file(fs::path(file.string() + ".ack1"), "ok\n");
    CHECK(error_message<lab::RuntimeError>([&] {
            lab::make_file_rendezvous(file, 0.2)->exchange(0, 2, {1, 2});
          }) == file.string() + ": rendezvous timed out after 0.2 s (rank 1 did not acknowledge)");
  }
  SECTION("rank 0 waits for an acknowledgement that never comes") {
    CHECK(error_message<lab::RuntimeError>([&] {
            lab::make_file_rendezvous(file, 0.2)->exchange(0, 3, {1, 2});
          }) == file.string() + ": rendezvous timed out after 0.2 s (rank 1 did not acknowledge)");
  }
  SECTION("a folder that does not exist") {
    const fs::path nowhere = dir.path / "missing" / "id";
    CHECK(contains(
        error_message<lab::UsageError>([&] { lab::make_file_rendezvous(nowhere, 5)->exchange(0, 2, {1}); }),
        nowhere.string() + ": cannot write the file"));
  }
}

TEST_CASE("TCP rendezvous: two threads over localhost agree on rank 0's bytes", "[distributed]") {
  const std::string address = "127.0.0.1:" + free_port();
  auto zero = lab::make_tcp_rendezvous(address, 20), one = lab::make_tcp_rendezvous(address, 20);
  const auto [of_zero, of_one] = exchange_on_two_threads(*zero, *one);  // rank 1 starts first and retries
  CHECK(of_zero == seeded_id());
  CHECK(of_one == seeded_id());
}

TEST_CASE("TCP rendezvous: timeouts and a malformed address are one-line errors", "[distributed]") {
  const std::string address = "127.0.0.1:" + free_port();
  SECTION("nobody listens") {
    const std::string error =
        error_message<lab::RuntimeError>([&] { lab::make_tcp_rendezvous(address, 0.3)->exchange(1, 2, {}); });
    CHECK(contains(error, "--master " + address + ": rendezvous timed out after 0.3 s ("));
    CHECK(!contains(error, "\n"));
  }
  SECTION("nobody connects") {
    CHECK(error_message<lab::RuntimeError>([&] {
            lab::make_tcp_rendezvous(address, 0.3)->exchange(0, 2, {1});
          }) == "--master " + address + ": rendezvous timed out after 0.3 s (0 of 1 ranks were served)");
  }
  SECTION("no port") {
    CHECK(error_message<lab::UsageError>([] { lab::make_tcp_rendezvous("localhost"); }) ==
          "--master 'localhost': expected host:port with a port from 1 to 65535");
    CHECK(error_message<lab::UsageError>([] { lab::make_tcp_rendezvous("localhost:99999"); }) ==
          "--master 'localhost:99999': expected host:port with a port from 1 to 65535");
  }
}

TEST_CASE("make_rendezvous: the file or the address given, neither, or a one-line error for both",
          "[distributed]") {
  CHECK(lab::make_rendezvous("", "") == nullptr);
  CHECK(lab::make_rendezvous("some/file", "") != nullptr);
  CHECK(lab::make_rendezvous("", "host0:29500") != nullptr);
  CHECK(error_message<lab::UsageError>([] { lab::make_rendezvous("some/file", "host0:29500"); }) ==
        "--rendezvous and --master: give one of them, not both");
}
