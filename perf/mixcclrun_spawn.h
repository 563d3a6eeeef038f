// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Starting ranks: their environment, the rendezvous port, and fork/exec with the process
// settings a rank needs (own process group, parent-death signal, signal mask restored).
//
// Process groups: every rank is the leader of its own process group. A terminal's Ctrl-C then
// reaches only mixcclrun (the foreground group), which forwards it once to each rank's group;
// were ranks in our group, they would get the terminal's SIGINT and our copy too. Signalling the
// group rather than the pid also reaches what a rank started itself (`sh -c '...'` wrappers).
// The price: ranks are background groups of the terminal, so their stdin is /dev/null.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "perf/mixcclrun_options.h"

namespace mixccl::run {

// The two rendezvous ports of a job. They differ on purpose: a PyTorch rank started by us binds
// its own store on MASTER_PORT (env:// initialisation) while mixccl's rank 0 binds NCCL_COMM_ID's
// port, so one shared port would make the second bind fail.
struct Ports {
  int master = 0;      // MASTER_PORT
  int commId = 0;      // the port in NCCL_COMM_ID
  std::string secret;  // MIXCCL_COMM_SECRET: random per job (makeJobSecret)
};

// 32 random hex digits (getrandom). With NCCL_COMM_ID every rank derives the job's id from the
// environment; this is what keeps other local users' processes from joining (PROTOCOL.md 3).
std::string makeJobSecret();

// Picks two distinct TCP ports on 127.0.0.1 that are free right now (bind to port 0, read them
// back, close). Another process could take one before a rank binds it; the window is short.
// Returns false with `error` set on failure.
bool pickFreePorts(Ports* ports, std::string* error);

// Environment of rank `rank`: ours (less an outer launcher's rank and size variables: OMPI_COMM_WORLD_*,
// PMI_RANK, SLURM_PROCID ...), then -x entries, then the launcher's variables (so -x cannot change a
// rank's identity). NCCL_COMM_ID is set only when neither ours nor -x set it, and then
// MIXCCL_COMM_SECRET too (ranks started elsewhere for a user's NCCL_COMM_ID would not know ours).
std::vector<std::string> rankEnvironment(const Options& o, int rank, const Ports& ports);

// Settings that fork() must undo in the child before exec.
struct ChildSetup {
  sigset_t originalMask;        // the mask we had before blocking signals for signalfd
  struct sigaction pipeAction;  // SIGPIPE's original disposition (we ignore it)
  pid_t parentPid = 0;          // to detect that we died before PR_SET_PDEATHSIG took effect
  int stdoutFd = -1;            // -1: inherit ours
  int stderrFd = -1;
};

// Forks and execs `argv` (searched in PATH) with `env`. Returns the child's pid, or -1 with
// `error` set if fork failed or the command could not be executed; `execErrno` then holds the
// exec errno (0 for a fork failure). Blocks only until the child has exec'd.
pid_t spawnRank(const std::vector<std::string>& argv, const std::vector<std::string>& env, const ChildSetup& setup,
                int* execErrno, std::string* error);

}  // namespace mixccl::run
