// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// --tag-output: one rank's stdout or stderr arrives on a pipe and leaves on ours, each line
// prefixed with "[rank] ". A line is written with one write() (prefix included), so lines of
// different ranks interleave but never mix. Only the supervisor thread calls these.
#pragma once

#include <string>

namespace mixccl::run {

class TaggedStream {
 public:
  // Owns `readFd` (made non-blocking here); writes to `outFd`, which it does not own.
  TaggedStream(int readFd, int outFd, int rank);
  ~TaggedStream();
  TaggedStream(const TaggedStream&) = delete;
  TaggedStream& operator=(const TaggedStream&) = delete;

  int fd() const { return readFd_; }
  bool open() const { return readFd_ >= 0; }

  // Reads what is available, up to a bound (the rest waits for the next call), and writes out
  // every complete line. At end of file it writes the unterminated tail (with a newline added)
  // and closes the pipe.
  void pump();
  // Writes the unterminated tail, if any, and closes the pipe: used when we stop waiting for
  // end of file (a rank's child may hold the pipe open after the rank exited).
  void close();

 private:
  void emit(const char* data, size_t n);

  int readFd_;
  int outFd_;
  std::string prefix_;
  std::string pending_;  // bytes after the last newline seen
};

}  // namespace mixccl::run
