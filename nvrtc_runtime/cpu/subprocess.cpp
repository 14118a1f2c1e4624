// posix_spawnp with the output redirected to an unlinked temporary file.
#include "nvrtc_runtime/cpu/subprocess.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvrtc_runtime/errors.hpp"

extern char** environ;

namespace lab::cpu {

ProcessResult run_process(const std::vector<std::string>& argv) {
  std::FILE* capture = std::tmpfile();
  if (!capture) throw RuntimeError(std::string("cannot create a temporary file: ") + std::strerror(errno));
  const int fd = ::fileno(capture);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The C locale keeps compiler messages in plain ASCII (gcc quotes names with 'x', not typographic quotes).
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LC_ALL=", 7) != 0) env.push_back(*e);
  static char c_locale[] = "LC_ALL=C";
  env.push_back(c_locale);
  env.push_back(nullptr);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ProcessResult result;
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    result.output = "cannot run '" + argv[0] + "': " + std::strerror(spawned);
    std::fclose(capture);
    return result;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  std::rewind(capture);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, capture)) > 0) result.output.append(buf, n);
  std::fclose(capture);
  return result;
}

}  // namespace lab::cpu
