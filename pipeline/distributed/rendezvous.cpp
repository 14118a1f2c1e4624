// make_rendezvous: the command line's choice between the file and the TCP rendezvous.
#include "pipeline/distributed/rendezvous.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

std::unique_ptr<Rendezvous> make_rendezvous(const std::string& file, const std::string& master,
                                            double timeout_seconds) {
  if (!file.empty() && !master.empty())
    throw UsageError("--rendezvous and --master: give one of them, not both");
  if (!file.empty()) return make_file_rendezvous(file, timeout_seconds);
  if (!master.empty()) return make_tcp_rendezvous(master, timeout_seconds);
  return nullptr;
}

}  // namespace lab
