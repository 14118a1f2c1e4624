// Rendezvous: how the processes of a run (one per host, or several per host) agree on rank 0's bytes, the
// 128-byte NCCL unique id, before NCCL can connect them. Two ways: a file on a shared file system
// (`--rendezvous FILE`) and a TCP connection to rank 0 (`--master host:port`). Ranks here are PROCESS ranks
// (the node rank), 0 .. world-1. Within one process no rendezvous is needed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace lab {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Rank 0 publishes `bytes_of_rank0` and gets them back; every other rank ignores its argument and gets rank
  // 0's bytes. Blocks until done or the rendezvous's timeout, then throws a one-line error naming the file or
  // address.
  virtual std::vector<uint8_t> exchange(int rank, int world, const std::vector<uint8_t>& bytes_of_rank0) = 0;
};

inline constexpr double kDefaultRendezvousTimeoutSeconds = 300;

// Rank 0 writes FILE atomically; the others wait for it, read it and acknowledge (FILE.ack<rank>); rank 0
// waits for every acknowledgement and removes FILE and the acknowledgements, so the next run starts clean.
std::unique_ptr<Rendezvous> make_file_rendezvous(const std::filesystem::path& file,
                                                 double timeout_seconds = kDefaultRendezvousTimeoutSeconds);

// `host:port`: rank 0 listens on port (every interface) and sends the bytes to each rank that connects; the
// others connect to host:port, retrying until rank 0 listens. UsageError for a malformed address.
std::unique_ptr<Rendezvous> make_tcp_rendezvous(const std::string& host_port,
                                                double timeout_seconds = kDefaultRendezvousTimeoutSeconds);

// From a command line's `--rendezvous FILE` and `--master host:port` (empty when not given): the one given,
// or nullptr for neither. UsageError when both are.
std::unique_ptr<Rendezvous> make_rendezvous(const std::string& file, const std::string& master,
                                            double timeout_seconds = kDefaultRendezvousTimeoutSeconds);

}  // namespace lab
