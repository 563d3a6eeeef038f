// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/launch.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>

namespace mixccl::perf {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<int> envInt(const char* name) {
  auto v = env(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v->c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  return static_cast<int>(n);
}

// One launcher's variable names. `localSize` and `nodes` tell whether all processes share a host.
struct Scheme {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
  const char* nodes;
};

// Checked in this order: mpirun inside a Slurm allocation sets both OMPI_* (per rank) and SLURM_*
// (of the allocation), and torchrun's variables are the most generic names, so they come last
// (unless TORCHELASTIC_RUN_ID says torchrun started this process: detectLaunch).
constexpr Scheme kSchemes[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_STEP_NUM_NODES"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", nullptr},
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Something every process of this job on this host sees alike, and the next job does not.
std::string jobKey(const Launch& l) {
  for (const char* name :
       {"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri", "PMIX_NAMESPACE", "PMI_KVSNAME", "PMI_PORT"}) {
    if (auto v = env(name)) return std::string(name) + "=" + *v;
  }
  if (auto job = env("SLURM_JOB_ID")) return "slurm=" + *job + "." + env("SLURM_STEP_ID").value_or("0");
  // Launchers start a host's ranks from one daemon (orted, hydra_pmi_proxy, slurmstepd), so
  // the parent pid is shared by them and unique while the job runs.
  return "ppid=" + std::to_string(getppid());
}

// Reads one launcher's variables: nothing when they are absent, false (with `error`) when they
// contradict each other, true when `out` was filled.
std::optional<bool> readScheme(const Scheme& s, Launch* out, std::string* error) {
  auto rank = envInt(s.rank);
  auto size = envInt(s.size);
  if (!rank || !size) return std::nullopt;
  if (*size < 1 || *rank < 0 || *rank >= *size) {
    *error =
        std::string(s.rank) + "=" + std::to_string(*rank) + " does not fit " + s.size + "=" + std::to_string(*size);
    return false;
  }
  out->launcher = s.launcher;
  out->procRank = *rank;
  out->nprocs = *size;
  out->localRank = envInt(s.localRank).value_or(0);
  if (s.localSize) {
    if (auto ls = envInt(s.localSize)) out->singleHost = *ls >= *size;
  }
  if (s.nodes) {
    if (auto n = envInt(s.nodes)) out->singleHost = *n <= 1;
  }
  return true;
}

}  // namespace

bool detectLaunch(Launch* out, std::string* error) {
  // torchrun's agent marks its workers with TORCHELASTIC_RUN_ID, and is then the innermost launcher:
  // under `srun torchrun ...` (one agent per host) srun's SLURM_PROCID/SLURM_NTASKS name the agent's
  // place, not this worker's, so RANK/WORLD_SIZE come first.
  if (env("TORCHELASTIC_RUN_ID")) {
    if (auto found = readScheme(kSchemes[std::size(kSchemes) - 1], out, error)) return *found;
  }
  for (const Scheme& s : kSchemes) {
    if (auto found = readScheme(s, out, error)) return *found;
  }
  return true;  // no launcher: one process
}

bool setupRendezvous(const Launch& l, std::string* note, std::string* error) {
  if (auto id = env("NCCL_COMM_ID")) {
    *note = "rendezvous NCCL_COMM_ID=" + *id;
    return true;
  }
  if (l.nprocs == 1) return true;  // threads share an id from ncclGetUniqueId
  std::string commId;
  auto addr = env("MASTER_ADDR");
  auto port = envInt("MASTER_PORT");
  if (addr && port) {
    // torchrun's agent serves its own store on MASTER_PORT; the next port is ours.
    const bool elastic = env("TORCHELASTIC_RUN_ID").has_value();
    commId = *addr + ":" + std::to_string(*port + (elastic ? 1 : 0));
    *note = "rendezvous NCCL_COMM_ID=" + commId +
            (elastic ? " (MASTER_PORT+1 under torchrun)" : " (MASTER_ADDR:MASTER_PORT)");
  } else if (l.singleHost && l.launcher != "none") {
    const std::string key = jobKey(l);
    // Below Linux's ephemeral range (32768+), so the port is not some connection's local end.
    const int p = 20000 + static_cast<int>(fnv1a(key) % 12000);
    commId = "127.0.0.1:" + std::to_string(p);
    *note = "rendezvous NCCL_COMM_ID=" + commId + " (one host; port from " + key + ")";
  } else {
    *error = std::to_string(l.nprocs) + " processes (" + l.launcher +
             ") span several hosts and no rendezvous is set: export NCCL_COMM_ID=<host of rank 0>:<free port> "
             "to every rank (or MASTER_ADDR and MASTER_PORT)";
    return false;
  }
  setenv("NCCL_COMM_ID", commId.c_str(), 1);
  return true;
}

}  // namespace mixccl::perf
