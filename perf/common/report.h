// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The tools' output: nccl-tests' text layout (preamble, device lines, two-group table, footer), so
// scripts that parse nccl-tests read ours, and the JSON file of -J (schema in perf/README.md).
// Only global rank 0 calls these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "perf/common/options.h"

namespace mixccl::perf {

struct RankLine {
  int rank;
  int group;
  int pid;
  int device;  // index of the rank on its host
  std::string host;
  std::string bus = "host";                   // the [bus id] field: host or opencl
  std::string name = "host memory (mixccl)";  // what the rank's buffers are
};

struct Cell {  // one column group (out-of-place or in-place) of a row
  double timeUs = 0;
  double algbw = 0;
  double busbw = 0;
  std::optional<int64_t> wrong;  // empty: not checked (N/A)
};

struct Row {
  size_t bytes;
  size_t count;
  std::string type;
  std::string redop;
  int root;
  Cell oop;
  Cell ip;
};

// `program`: the tool's name (all_reduce_perf), for the "Collective test starting/concluded" lines.
void printPreamble(const Options& o, const std::string& program, const std::vector<RankLine>& ranks,
                   const std::vector<std::string>& notes);
void printTableHeader();
void printRow(const Row& row);
// errors: (row, placement) pairs with wrong elements; avgBusbw over every printed cell; bwOk: the
// verdict of NCCL_TESTS_MIN_BW (printed after the bandwidth), empty when that variable is unset.
void printFooter(const std::string& program, int errors, double avgBusbw, std::optional<bool> bwOk);

// A time in microseconds as nccl-tests prints it: 7 wide, 2, 1 or 0 decimals by magnitude.
std::string formatTime(double us);

// The file of -J, in nccl-tests' JSON layout (version 2: "config", "devices", "results" with
// "out_of_place"/"in_place" cells, "out_of_bounds", "average_bus_bandwidth"), so tools that read
// nccl-tests' JSON read ours; mixccl's own facts go under "mixccl". As nccl-tests does, an existing
// file is never overwritten: the report goes to PATH.0, PATH.1, ... instead (claim()).
class JsonReport {
 public:
  JsonReport(const Options& o, std::string collective, int nranks, std::string host, std::vector<std::string> args);
  // Picks the file (printing nccl-tests' "# Writing JSON output to" line); false, with a message on
  // stderr, when no file can be made there.
  bool claim(const std::string& path);
  void setDevices(const std::vector<RankLine>& ranks) { devices_ = ranks; }
  void add(const Row& row) { rows_.push_back(row); }
  // Writes the whole report again (after each -N cycle); false (with a message on stderr) when it
  // cannot. bwOk as for printFooter().
  bool write(int errors, double avgBusbw, std::optional<bool> bwOk) const;

 private:
  const Options& o_;
  std::string collective_;
  int nranks_;
  std::string host_;
  std::vector<std::string> args_;
  std::string startTime_;
  std::string path_;
  std::vector<RankLine> devices_;
  std::vector<Row> rows_;
};

}  // namespace mixccl::perf
