// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The generated component tables (cmake/components.cmake): every built-in transport and device
// backend is listed under a valid, unique name and its factory makes the component of that name.

#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <set>
#include <string>

#include "src/device/registry.h"
#include "transports/registry.h"

namespace mixccl {
namespace {

TEST(ComponentsTest, TransportsAreRegistered) {
  size_t n = 0;
  const TransportComponent* all = builtinTransports(&n);
  ASSERT_GE(n, 2u);
  std::set<std::string> names;
  const std::regex wireName("[a-z0-9_]{1,15}");
  TransportContext ctx;
  ctx.nranks = 1;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(std::regex_match(all[i].name, wireName)) << all[i].name;
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name << " registered twice";
    EXPECT_EQ(findTransport(all[i].name), &all[i]);
    std::unique_ptr<Transport> t = all[i].make(ctx);
    ASSERT_NE(t, nullptr) << all[i].name;
    EXPECT_STREQ(t->name(), all[i].name);
  }
  EXPECT_TRUE(names.count("shm") && names.count("tcp"));
  EXPECT_EQ(findTransport("no_such"), nullptr);
  EXPECT_EQ(findTransport(nullptr), nullptr);
  EXPECT_NE(builtinTransportNames().find("tcp"), std::string::npos);
}

TEST(ComponentsTest, BackendsAreRegistered) {
  size_t n = 0;
  const BuiltinBackend* all = builtinBackends(&n);
  ASSERT_GE(n, 1u);
  std::set<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name << " registered twice";
    EXPECT_EQ(findBuiltinBackend(all[i].name), &all[i]);
  }
  const BuiltinBackend* host = findBuiltinBackend("host");
  ASSERT_NE(host, nullptr) << "backends: " << builtinBackendNames();
  std::unique_ptr<DeviceBackend> dev;
  ASSERT_EQ(host->make(&dev), Result::kSuccess);
  ASSERT_NE(dev, nullptr);
  EXPECT_STREQ(dev->name(), "host");
  EXPECT_EQ(dev->wireId(), 0u);
  EXPECT_EQ(findBuiltinBackend("no_such"), nullptr);
  EXPECT_EQ(findBuiltinBackend(nullptr), nullptr);
  EXPECT_NE(builtinBackendNames().find("host"), std::string::npos);
}

}  // namespace
}  // namespace mixccl
