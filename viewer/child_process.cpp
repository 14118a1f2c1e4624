// Spawning, waiting with a timeout and describing the end of a child process of the viewer.
#include "viewer/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace lab::viewer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kLogTailLines = 12;

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last few lines of a log, to keep the failure paragraph short.
std::string tail_lines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n')) --pos;
  size_t start = pos;
  for (size_t seen = 0; start > 0; --start)
    if (text[start - 1] == '\n' && ++seen == lines) break;
  return text.substr(start, pos - start);
}

}  // namespace

ChildExit run_child_process(const std::vector<std::string>& args, const fs::path& log_file,
                            double timeout_s) {
  ChildExit exit;
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // own group: a timeout kills the whole child
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawn_error != 0) {
    exit.spawn_error = std::strerror(spawn_error);
    return exit;
  }

  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      exit.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exit.timed_out && WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  if (WIFEXITED(status)) exit.status = WEXITSTATUS(status);
  exit.log_tail = tail_lines(read_text(log_file), kLogTailLines);
  return exit;
}

std::string child_failure(const ChildExit& exit, const std::string& who, double timeout_s, bool has_result) {
  const std::string log = exit.log_tail.empty() ? "" : "\n" + exit.log_tail;
  if (!exit.spawn_error.empty()) return who + ": cannot start the child process: " + exit.spawn_error;
  if (exit.timed_out)
    return who + ": no result after " + std::to_string(static_cast<int>(timeout_s)) +
           " s (hang or deadlock); the child process was killed" + log;
  if (exit.signal > 0)
    return who + ": the child process died with " + signal_text(exit.signal) +
           " (a fault in a kernel or the emulator)" + log;
  if (!has_result)
    return who + ": the child process exited with status " + std::to_string(exit.status) + " and no result" +
           log;
  return "";
}

}  // namespace lab::viewer
