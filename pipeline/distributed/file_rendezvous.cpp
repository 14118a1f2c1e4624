// The file rendezvous: rank 0 writes "lab-rendezvous 1 <world>\n<hex bytes>\n" atomically, the others poll
// for it, read it and acknowledge; rank 0 removes it once every rank has.
#include <chrono>
#include <iomanip>
#include <sstream>
#include <thread>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/distributed/rendezvous.hpp"

namespace lab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(20);

std::string encode(int world, const std::vector<uint8_t>& bytes) {
  std::ostringstream text;
  text << "lab-rendezvous 1 " << world << "\n" << std::hex << std::setfill('0');
  for (uint8_t b : bytes) text << std::setw(2) << int(b);
  text << "\n";
  return text.str();
}

std::vector<uint8_t> decode(const fs::path& file, const std::string& text, int world) {
  std::istringstream in(text);
  std::string magic, hex;
  int version = 0, written_world = 0;
  in >> magic >> version >> written_world >> hex;
  std::string rest;
  in >> rest;
  const bool hex_ok = hex.size() % 2 == 0 && hex.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!in.eof() || magic != "lab-rendezvous" || version != 1 || written_world < 1 || !hex_ok || !rest.empty())
    throw UsageError(file.string() +
                     ": not a lab rendezvous file (expected \"lab-rendezvous 1 <processes>\" "
                     "and a hex line, as rank 0 writes it)");
  if (written_world != world)
    throw UsageError(file.string() + ": rank 0 wrote it for " + std::to_string(written_world) +
                     " processes, this one is of " + std::to_string(world));
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < hex.size(); i += 2)
    bytes.push_back(uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

fs::path ack_of(const fs::path& file, int rank) {
  return fs::path(file.string() + ".ack" + std::to_string(rank));
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

class FileRendezvous : public Rendezvous {
 public:
  FileRendezvous(fs::path file, double timeout_seconds) : file_(std::move(file)), timeout_(timeout_seconds) {}

  std::vector<uint8_t> exchange(int rank, int world, const std::vector<uint8_t>& bytes_of_rank0) override {
    if (world <= 1) return bytes_of_rank0;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
    if (rank == 0) {
      remove_acknowledgements(world);  // a killed run's, which would pass for this run's
      write_file_atomically(file_, encode(world, bytes_of_rank0));
      for (int r = 1; r < world; ++r) {
        wait_for(ack_of(file_, r), deadline, "rank " + std::to_string(r) + " did not acknowledge");
      }
      std::error_code ec;
      fs::remove(file_, ec);
      remove_acknowledgements(world);
      return bytes_of_rank0;
    }
    wait_for(file_, deadline, "rank 0 did not write it");
    std::vector<uint8_t> bytes = decode(file_, read_input_file(file_, "the rendezvous file"), world);
    write_file_atomically(ack_of(file_, rank), "ok\n");
    return bytes;
  }

 private:
  void remove_acknowledgements(int world) const {
    std::error_code ec;
    for (int r = 1; r < world; ++r) fs::remove(ack_of(file_, r), ec);
  }

  void wait_for(const fs::path& path, Clock::time_point deadline, const std::string& what) const {
    while (!present(path)) {
      if (Clock::now() >= deadline) {
        std::ostringstream seconds;
        seconds << timeout_;
        throw RuntimeError(file_.string() + ": rendezvous timed out after " + seconds.str() + " s (" + what +
                           ")");
      }
      std::this_thread::sleep_for(kPoll);
    }
  }

  fs::path file_;
  double timeout_;
};

}  // namespace

std::unique_ptr<Rendezvous> make_file_rendezvous(const std::filesystem::path& file, double timeout_seconds) {
  return std::make_unique<FileRendezvous>(file, timeout_seconds);
}

}  // namespace lab
