// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Command line of mixcclrun, the one-host launcher. Parsing is hand-written rather than done
// with a flag library because mpirun's spelling (`-np 4`, a multi-letter option with one dash)
// and "everything from the first non-option word on is the rank's command" are both awkward to
// express in the usual libraries, and the grammar is tiny.
#pragma once

#include <string>
#include <vector>

namespace mixccl::run {

struct Options {
  int np = 0;                    // number of ranks; parse() guarantees >= 1
  double graceSeconds = 5.0;     // SIGTERM -> SIGKILL delay when stopping ranks
  double timeoutSeconds = 0.0;   // whole-job limit; 0 means none
  int port = 0;                  // MASTER_PORT (NCCL_COMM_ID gets port+1); 0: pick free ports
  bool tagOutput = false;        // prefix each output line with "[rank] "
  std::vector<std::string> env;  // -x / --env entries: "VAR=VALUE" or "VAR" (copied from ours)
  // --rank-env entries: extra "VAR=VALUE" for some ranks only, applied after `env` in order given.
  struct RankEnv {
    std::vector<int> ranks;  // sorted, each < np
    std::string entry;       // "VAR=VALUE"
  };
  std::vector<RankEnv> rankEnv;
  std::vector<std::string> command;  // argv of every rank; parse() guarantees non-empty
};

// What parse() decided. `exitCode` is meaningful only when `exit` is true: 0 after --help (empty
// `message`: print the usage) or --version (`message` holds it), 2 for a usage error (the message,
// already prefixed with "mixcclrun: ", is in `message`).
struct ParseResult {
  Options options;
  bool exit = false;
  int exitCode = 0;
  std::string message;
};

ParseResult parseOptions(int argc, char** argv);

// The --help text.
const char* usageText();

}  // namespace mixccl::run
