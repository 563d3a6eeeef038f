// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/mixcclrun_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace mixccl::run {
namespace {

// A rank that prints without newlines must not make us buffer without bound.
constexpr size_t kMaxPendingBytes = 64 * 1024;
// Reads per pump() call. A rank that writes faster than we tag and forward its lines keeps the
// pipe full, so reading until EAGAIN would never return to the supervisor's poll loop: signals,
// --timeout and the other ranks' deaths would go unnoticed. poll() reports what is left.
constexpr int kMaxReadsPerPump = 4;

// Writes all of `data`, waiting if our output is a full non-blocking pipe. Errors (a closed
// terminal, EPIPE) drop the output: losing log lines must not stop the job.
void writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 1000);
    } else {
      return;
    }
  }
}

}  // namespace

TaggedStream::TaggedStream(int readFd, int outFd, int rank) : readFd_(readFd), outFd_(outFd) {
  // Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) about "[" + std::string.
  prefix_.append("[").append(std::to_string(rank)).append("] ");
  fcntl(readFd_, F_SETFL, fcntl(readFd_, F_GETFL) | O_NONBLOCK);
}

TaggedStream::~TaggedStream() { close(); }

void TaggedStream::emit(const char* data, size_t n) {
  std::string line;
  line.reserve(prefix_.size() + n + 1);
  line.append(prefix_).append(data, n);
  if (line.back() != '\n') line.push_back('\n');
  writeAll(outFd_, line.data(), line.size());
}

void TaggedStream::pump() {
  char buf[16384];
  for (int reads = 0; readFd_ >= 0 && reads < kMaxReadsPerPump; ++reads) {
    ssize_t n = read(readFd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // end of file, or an error we cannot recover from
      close();
      return;
    }
    pending_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(pending_.data() + start, nl + 1 - start);
    }
    pending_.erase(0, start);
    if (pending_.size() >= kMaxPendingBytes) {
      emit(pending_.data(), pending_.size());
      pending_.clear();
    }
  }
}

void TaggedStream::close() {
  if (readFd_ < 0) return;
  if (!pending_.empty()) emit(pending_.data(), pending_.size());
  pending_.clear();
  ::close(readFd_);
  readFd_ = -1;
}

}  // namespace mixccl::run
