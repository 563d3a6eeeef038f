// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Which process of a job this is, read from the launcher's environment (no MPI library is linked),
// and how the processes find rank 0 (the rendezvous). The rules are written out in perf/README.md.
#pragma once

#include <string>

namespace mixccl::perf {

struct Launch {
  std::string launcher = "none";  // none, openmpi, mpich, slurm, torchrun
  int procRank = 0;               // this process among the job's processes
  int nprocs = 1;
  int localRank = 0;       // among the processes on this host
  bool singleHost = true;  // false when the launcher says the processes span several hosts
};

// Reads the launcher variables. Returns false with `error` set when they are inconsistent.
bool detectLaunch(Launch* out, std::string* error);

// With several processes, makes sure NCCL_COMM_ID names rank 0's rendezvous address before the
// first NCCL call: kept if set; else MASTER_ADDR:MASTER_PORT (+1 under torchrun's elastic agent,
// whose store holds MASTER_PORT); else, on one host, 127.0.0.1 and a port derived from the job id.
// `note` says what was chosen (for the output's comment lines). Returns false with `error` set when
// no rendezvous can be found.
bool setupRendezvous(const Launch& launch, std::string* note, std::string* error);

}  // namespace mixccl::perf
