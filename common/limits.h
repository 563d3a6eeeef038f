// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Process resource limits that collectives run into.
//
// Each rank keeps a socket or shared-memory file per peer and lane, and a bootstrap root holds one
// connection per rank while a job registers, so a job of a few hundred ranks outgrows the usual
// soft RLIMIT_NOFILE of 1024 long before the hard limit. As NCCL does, the library raises the soft
// limit to the hard one; only the hard limit (`ulimit -Hn`, set by the administrator) binds.

#include <string>

namespace mixccl {

// Raises the soft RLIMIT_NOFILE to the hard limit. Only the first call in a process acts; it logs
// "old -> new" at INFO (INIT). A failure is logged and ignored: small jobs work under any limit,
// and those that do not fail later with a message naming the limit. Thread-safe.
void raiseFileLimit();

// "1024/4096": the current soft/hard RLIMIT_NOFILE ("unlimited" for no limit), for messages.
std::string fileLimitText();

}  // namespace mixccl
