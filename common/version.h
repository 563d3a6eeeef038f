// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// mixccl's own version (CMake's project version plus the git commit seen at configure time), as
// the log banner and bug reports show it. ncclGetVersion keeps reporting the NCCL ABI version.

namespace mixccl::version {

// "2.28.9+mixccl-0.3.0": the NCCL version we implement, then ours, as NCCL writes "2.18.3+cuda12.2".
const char* ncclStyle();
// Short git commit of the build, "" when it was not built from a git checkout.
const char* gitCommit();
// Logs "NCCL version 2.28.9+mixccl-0.3.0 (git abc1234, <backends>)" once per process at
// NCCL_DEBUG=VERSION and above. Thread-safe.
void logBanner(const char* backends);

}  // namespace mixccl::version
