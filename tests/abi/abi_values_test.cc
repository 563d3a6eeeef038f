// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Compares include/nccl.h and include/mixccl/device_api.h with NVIDIA's NCCL 2.28.9 headers, item
// by item (values, sizes, offsets, field types, function types; see abi_items.inc), and checks
// that the item list names everything NVIDIA's nccl.h defines. Skips, saying why, when NVIDIA's
// headers were not found at configure time.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/abi/abi_table.h"

namespace mixccl::abitest {
namespace {

std::string show(const Item& it) {
  switch (it.kind) {
    case Kind::kInt:
      return std::to_string(it.i);
    case Kind::kFloat: {
      std::ostringstream os;
      os << it.f;
      return os.str();
    }
    case Kind::kString:
      return std::string("\"") + (it.s ? it.s : "(null)") + "\"";
  }
  return "?";
}

bool same(const Item& a, const Item& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kInt:
      return a.i == b.i;
    case Kind::kFloat:
      return a.f == b.f;
    case Kind::kString:
      return std::string(a.s ? a.s : "") == std::string(b.s ? b.s : "");
  }
  return false;
}

void compare(const Table& real, const Table& ours) {
  if (!real.available) GTEST_SKIP() << real.why;
  ASSERT_EQ(real.count, ours.count) << "the two sides expanded different item lists";
  size_t mismatches = 0;
  for (size_t i = 0; i < real.count; ++i) {
    const Item& r = real.items[i];
    const Item& o = ours.items[i];
    ASSERT_STREQ(r.name, o.name);
    if (!same(r, o)) {
      ++mismatches;
      ADD_FAILURE() << r.name << ": NCCL has " << show(r) << ", mixccl has " << show(o);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << real.count << " items";
  std::printf("compared %zu items, %zu differ\n", real.count, mismatches);
}

TEST(AbiValues, CoreHeaderMatchesNccl) { compare(realCoreTable(), ourCoreTable()); }

TEST(AbiValues, DeviceApiMatchesNccl) { compare(realDeviceTable(), ourDeviceTable()); }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string stripComments(const std::string& text) {
  static const std::regex kBlock(R"(/\*[\s\S]*?\*/)");
  static const std::regex kLine(R"(//[^\n]*)");
  return std::regex_replace(std::regex_replace(text, kBlock, " "), kLine, " ");
}

// Every name NVIDIA's nccl.h defines: macros, enumerators, typedef names and functions.
std::set<std::string> namesDefinedBy(const std::string& header) {
  const std::string code = stripComments(header);
  std::set<std::string> names;
  const std::regex patterns[] = {
      std::regex(R"(#\s*define\s+(NCCL_\w+))"),                  // macros
      std::regex(R"(\b(nccl\w+)\s*=)"),                          // enumerators
      std::regex(R"(\}\s*(nccl\w+)\s*;)"),                       // typedef struct/enum {...} name;
      std::regex(R"(struct\s+(nccl\w+)\s*\{)"),                  // struct tags
      std::regex(R"(typedef\s+struct\s+\w+\s*\*\s*(nccl\w+))"),  // opaque handle typedefs
      std::regex(R"(\b(p?nccl\w+)\s*\()"),                       // functions
  };
  for (const std::regex& re : patterns) {
    for (std::sregex_iterator it(code.begin(), code.end(), re), end; it != end; ++it) names.insert((*it)[1]);
  }
  names.erase("NCCL_H_");  // the include guard
  return names;
}

bool mentions(const std::string& text, const std::string& word) {
  return std::regex_search(text, std::regex("\\b" + word + "\\b"));
}

TEST(AbiValues, ItemListCoversRealHeader) {
  if (!realCoreTable().available) GTEST_SKIP() << realCoreTable().why;
  const std::string real = slurp(MIXCCL_REAL_NCCL_H);
  ASSERT_FALSE(real.empty()) << "cannot read " << MIXCCL_REAL_NCCL_H;
  const std::string items = slurp(MIXCCL_ABI_ITEMS);
  ASSERT_FALSE(items.empty()) << "cannot read " << MIXCCL_ABI_ITEMS;
  const std::string ours = stripComments(slurp(MIXCCL_OUR_NCCL_H));
  ASSERT_FALSE(ours.empty()) << "cannot read " << MIXCCL_OUR_NCCL_H;

  const std::set<std::string> names = namesDefinedBy(real);
  EXPECT_GT(names.size(), 150u) << "the header scan found suspiciously few names";
  std::string notInItems, notInOurs;
  for (const std::string& n : names) {
    if (!mentions(items, n)) notInItems += " " + n;
    if (!mentions(ours, n)) notInOurs += " " + n;
  }
  EXPECT_EQ(notInItems, "") << "names in NVIDIA's nccl.h that abi_items.inc does not check";
  EXPECT_EQ(notInOurs, "") << "names in NVIDIA's nccl.h missing from include/nccl.h";
  std::printf("NVIDIA's nccl.h defines %zu names; all are checked\n", names.size());
}

}  // namespace
}  // namespace mixccl::abitest
