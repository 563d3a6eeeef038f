// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/report.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

extern char** environ;

namespace mixccl::perf {

std::string formatTime(double us) {
  // Three significant places or so in 7 characters: 12345, 123.4, 12.34 (nccl-tests' steps).
  char buf[64];
  const char* fmt = us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f";
  std::snprintf(buf, sizeof buf, fmt, us);
  return buf;
}

void printPreamble(const Options& o, const std::vector<RankLine>& ranks, const std::vector<std::string>& notes) {
  const bool factor = o.stepFactor > 1;
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d\n",
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes, factor ? o.stepFactor : o.stepBytes, factor ? "factor" : "bytes",
      o.warmupIters, o.iters, o.aggIters, o.check ? 1 : 0, o.graph);
  // nccl-tests' "# Blocking Enabled:" line, one wording per -z mode.
  if (o.blocking == 1) std::printf("# Blocking Enabled: wait and barrier after each iteration \n");
  if (o.blocking == 2) std::printf("# Blocking Enabled: wait after each iteration, no barrier \n");
  if (o.blocking == 3) std::printf("# Blocking Enabled: wait and barrier after each iteration, barrier not timed \n");
  for (const std::string& n : notes) std::printf("# %s\n", n.c_str());
  std::printf("#\n# Using devices\n");
  // The device field keeps nccl-tests' shape ("device N [bus] name") so line parsers still match;
  // N is the rank's index on its host and the bus id reads "host" or "opencl" (-m).
  for (const RankLine& r : ranks) {
    std::printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r.rank, r.group, r.pid, r.host.c_str(),
                r.device, r.bus.c_str(), r.name.c_str());
  }
  std::fflush(stdout);
}

void printTableHeader() {
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
              "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

namespace {

void printCell(const Cell& c) {
  const std::string t = formatTime(c.timeUs);
  if (c.wrong) {
    std::printf("  %7s  %6.2f  %6.2f  %5g", t.c_str(), c.algbw, c.busbw, static_cast<double>(*c.wrong));
  } else {
    std::printf("  %7s  %6.2f  %6.2f  %5s", t.c_str(), c.algbw, c.busbw, "N/A");
  }
}

nlohmann::ordered_json cellJson(const Cell& c) {
  nlohmann::ordered_json j = {{"time_us", c.timeUs}, {"algbw", c.algbw}, {"busbw", c.busbw}, {"wrong", nullptr}};
  if (c.wrong) j["wrong"] = *c.wrong;
  return j;
}

}  // namespace

void printRow(const Row& r) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, r.type.c_str(), r.redop.c_str(), r.root);
  printCell(r.oop);
  printCell(r.ip);
  std::printf("\n");
  std::fflush(stdout);
}

void printFooter(int errors, double avgBusbw, std::optional<bool> bwOk) {
  std::printf("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g %s\n", avgBusbw, !bwOk ? "" : *bwOk ? "OK" : "FAILED");
  std::printf("#\n\n");
  std::fflush(stdout);
}

JsonReport::JsonReport(std::string collective, int nranks, std::string host)
    : collective_(std::move(collective)), nranks_(nranks), host_(std::move(host)) {}

void JsonReport::add(const Row& row) { rows_.push_back(row); }

bool JsonReport::write(const std::string& path, double avgBusbw) const {
  nlohmann::ordered_json doc;
  doc["tool"] = "mixccl";
  doc["collective"] = collective_;
  doc["nranks"] = nranks_;
  doc["host"] = host_;
  const char* shmOff = std::getenv("NCCL_SHM_DISABLE");
  doc["transport"] = (shmOff && std::atoi(shmOff) != 0) ? "tcp" : "shm";
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    const std::string name(*e, static_cast<size_t>(eq - *e));
    if (name.rfind("NCCL_", 0) == 0 || name.rfind("MIXCCL_", 0) == 0) env[name] = eq + 1;
  }
  doc["env"] = env;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Row& r : rows_) {
    rows.push_back({{"bytes", r.bytes},
                    {"count", r.count},
                    {"type", r.type},
                    {"redop", r.redop},
                    {"root", r.root},
                    {"oop", cellJson(r.oop)},
                    {"ip", cellJson(r.ip)}});
  }
  doc["rows"] = rows;
  doc["avg_busbw"] = avgBusbw;
  std::ofstream out(path);
  out << doc.dump(2) << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "-J %s: cannot write the JSON output\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace mixccl::perf
