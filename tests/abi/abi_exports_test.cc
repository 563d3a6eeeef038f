// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The dynamic symbol table of the built library against NCCL 2.28.9's: it must define every name
// NVIDIA's libnccl.so.2 defines (nccl_2.28.9_exports.txt), export nothing outside nccl*/pnccl* and
// the mixccl* extensions of include/mixccl/,
// and carry the SONAME libnccl.so.2, so that it can stand in for NVIDIA's library at load time.
// Uses nm and readelf from the toolchain CMake found.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

// Runs a command and returns its standard output; *ok reports a clean exit.
std::string run(const std::string& cmd, bool* ok) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *ok = false;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *ok = pclose(p) == 0;
  return out;
}

// Names of the defined dynamic symbols of the library under test.
std::set<std::string> exportedNames() {
  bool ok = false;
  const std::string out = run(std::string("'") + MIXCCL_NM + "' -D --defined-only '" + MIXCCL_LIB + "'", &ok);
  EXPECT_TRUE(ok) << MIXCCL_NM << " failed on " << MIXCCL_LIB;
  std::set<std::string> names;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    // "<address> <type> <name>", the name possibly carrying a version suffix (name@@VER).
    std::istringstream fields(line);
    std::string addr, type, name;
    if (!(fields >> addr >> type >> name)) continue;
    names.insert(name.substr(0, name.find('@')));
  }
  return names;
}

std::set<std::string> expectedNames() {
  std::ifstream in(MIXCCL_EXPORTS_LIST);
  EXPECT_TRUE(in.good()) << "cannot read " << MIXCCL_EXPORTS_LIST;
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line);
  }
  return names;
}

TEST(AbiExports, DefinesEveryNccl2289Symbol) {
  const std::set<std::string> have = exportedNames();
  const std::set<std::string> want = expectedNames();
  ASSERT_FALSE(want.empty());
  std::string missing;
  size_t nMissing = 0;
  for (const std::string& name : want) {
    if (have.count(name) == 0) {
      missing += "\n  " + name;
      ++nMissing;
    }
  }
  EXPECT_EQ(nMissing, 0u) << nMissing << " of " << want.size()
                          << " symbols of NVIDIA's libnccl.so.2 are not defined by " << MIXCCL_LIB << ":" << missing;
}

TEST(AbiExports, ExportsOnlyNcclNamesAndExtensions) {
  std::string extra;
  for (const std::string& name : exportedNames()) {
    if (name.rfind("nccl", 0) != 0 && name.rfind("pnccl", 0) != 0 && name.rfind("mixccl", 0) != 0) {
      extra += "\n  " + name;
    }
  }
  EXPECT_EQ(extra, "") << "exported symbols outside nccl*/pnccl*/mixccl* (check cmake/nccl.map and visibility):"
                       << extra;
}

TEST(AbiExports, SonameIsLibnccl2) {
  bool ok = false;
  const std::string out = run(std::string("'") + MIXCCL_READELF + "' -d '" + MIXCCL_LIB + "'", &ok);
  ASSERT_TRUE(ok) << MIXCCL_READELF << " failed on " << MIXCCL_LIB;
  EXPECT_NE(out.find("(SONAME)"), std::string::npos) << "no SONAME entry:\n" << out;
  EXPECT_NE(out.find("[libnccl.so.2]"), std::string::npos) << "SONAME is not libnccl.so.2:\n" << out;
}

}  // namespace
