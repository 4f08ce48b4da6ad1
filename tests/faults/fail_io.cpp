// SPDX-License-Identifier: MIT
// LD_PRELOAD fault injector (C++ only to keep the project CXX-only; every symbol is extern "C"): makes
// write()/pwrite()/fsync() fail like a full or broken disk.
//   TENSORFILE_FAIL_MATCH=s     only descriptors whose path contains s (default ".tmp-": save's temporary)
//   TENSORFILE_FAIL_AFTER=N     after N bytes in total, writes fail (a write crossing N is cut short first)
//   TENSORFILE_FAIL_ERRNO=n     the errno of failing writes (default ENOSPC=28; EIO=5)
//   TENSORFILE_FAIL_FSYNC=n     fsync/fdatasync on a matching descriptor fails with errno n
//   TENSORFILE_SHORT_WRITES=k   every write moves at most k bytes (no failure: exercises partial writes)
// Counters: TENSORFILE_FAIL_AFTER is re-read on every call; the byte count restarts whenever its value
// changes or the driver calls tensorfile_faults_reset(), so one process can run many injections. Every
// injected failure is counted in tensorfile_faults_injected(). The driver finds both with dlsym.
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

extern "C" {

static unsigned long long written_ = 0;
static char last_after_[64] = "";
static unsigned long long injected_ = 0;

unsigned long long tensorfile_faults_injected(void) { return injected_; }
void tensorfile_faults_reset(void) {
  written_ = 0;
  last_after_[0] = '\0';
}

static int matches(int fd) {
  const char* match = getenv("TENSORFILE_FAIL_MATCH");
  if (match == NULL) match = ".tmp-";
  char link[64], target[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  return strstr(target, match) != nullptr;
}

/* How many of `count` bytes may go through; -1 with errno set when none may. */
static long long allowance(int fd, size_t count) {
  if (!matches(fd)) return (long long)count;
  const char* shorts = getenv("TENSORFILE_SHORT_WRITES");
  if (shorts != NULL && atoll(shorts) > 0 && count > (size_t)atoll(shorts)) count = (size_t)atoll(shorts);
  const char* after = getenv("TENSORFILE_FAIL_AFTER");
  if (after == NULL) return (long long)count;
  if (strncmp(after, last_after_, sizeof last_after_) != 0) {
    snprintf(last_after_, sizeof last_after_, "%s", after);
    written_ = 0;
  }
  const unsigned long long limit = strtoull(after, NULL, 10);
  if (written_ >= limit) {
    const char* e = getenv("TENSORFILE_FAIL_ERRNO");
    errno = e ? atoi(e) : ENOSPC;
    ++injected_;
    return -1;
  }
  if (written_ + count > limit) count = (size_t)(limit - written_);
  return (long long)count;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t) = nullptr;
  if (!real) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  const long long n = allowance(fd, count);
  if (n < 0) return -1;
  const ssize_t put = real(fd, buf, (size_t)n);
  if (put > 0 && matches(fd)) written_ += (unsigned long long)put;
  return put;
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void*, size_t, off_t) = nullptr;
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  const long long n = allowance(fd, count);
  if (n < 0) return -1;
  const ssize_t put = real(fd, buf, (size_t)n, offset);
  if (put > 0 && matches(fd)) written_ += (unsigned long long)put;
  return put;
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) { return pwrite(fd, buf, count, offset); }

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  // How tensorfile writes saves; forwarded through write() one buffer at a time so the same limits apply.
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    const ssize_t put = write(fd, iov[i].iov_base, iov[i].iov_len);
    if (put < 0) return total > 0 ? total : -1;
    total += put;
    if ((size_t)put < iov[i].iov_len) break;
  }
  return total;
}

static int fail_sync(int fd) {
  const char* e = getenv("TENSORFILE_FAIL_FSYNC");
  if (e != NULL && atoi(e) != 0 && matches(fd)) {
    errno = atoi(e);
    ++injected_;
    return 1;
  }
  return 0;
}

int fsync(int fd) {
  static int (*real)(int) = nullptr;
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (fail_sync(fd)) return -1;
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int) = nullptr;
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  if (fail_sync(fd)) return -1;
  return real(fd);
}

}  // extern "C"
