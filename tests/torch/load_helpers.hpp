// SPDX-License-Identifier: MIT
// Test helpers for loads: a body run in a child process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <exception>

namespace tensorfile_test {

/// Runs `body` (returning an exit code) in a forked child killed after `seconds`; returns its exit code,
/// or 128 + the signal that ended it (a crash or a hang does not take the test program with it).
template <class Body>
int exit_status_in_child(Body&& body, unsigned seconds) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(seconds);
    int code = 100;
    try {
      code = body();
    } catch (...) {
      code = 101;  // an exception that the body did not expect
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace tensorfile_test
