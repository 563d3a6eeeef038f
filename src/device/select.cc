// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/select.h"

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "common/config.h"
#include "common/log.h"
#include "src/device/plugin/plugin_loader.h"
#include "src/device/registry.h"

namespace mixccl {
namespace {

// The outcome of the one creation. Never destroyed: the backend may still be used by atexit
// handlers and by threads the application leaves running, and a plugin must not be dlclose()d
// under them.
struct Choice {
  Result result = Result::kInternalError;
  std::string message;
  DeviceBackend* backend = nullptr;
};

Result create(const std::string& value, std::unique_ptr<DeviceBackend>* out) {
  const char* knob = config::name(config::Knob::kDeviceBackend);
  if (value.find('/') != std::string::npos) return loadPluginBackend(value.c_str(), out);
  const std::string name = value.empty() ? "host" : value;
  if (const BuiltinBackend* b = findBuiltinBackend(name.c_str())) return b->make(out);
  if (name == "cuda") {
    return fail(Result::kInvalidUsage,
                "%s=cuda: mixccl was built without the CUDA backend; use one of: %s, or the path of a device "
                "backend plugin",
                knob, builtinBackendNames().c_str());
  }
  if (name == "opencl") {
    return fail(Result::kInvalidUsage,
                "%s=opencl: mixccl was built without the OpenCL backend (no OpenCL headers/ICD loader at build "
                "time); use one of: %s, or the path of a device backend plugin",
                knob, builtinBackendNames().c_str());
  }
  return fail(Result::kInvalidArgument,
              "%s=%s: unknown device backend; known names: %s; a plugin is given by its path, which must contain '/' "
              "(e.g. ./libmybackend.so)",
              knob, name.c_str(), builtinBackendNames().c_str());
}

Choice* choose() {
  auto* c = new Choice();
  const std::string value = config::getString(config::Knob::kDeviceBackend);
  std::unique_ptr<DeviceBackend> backend;
  // Quiet: processBackend() records the outcome for every caller, the first one included, so
  // the failure is logged at WARN once per caller rather than twice for the first.
  QuietFailures quiet;
  try {
    c->result = create(value, &backend);
  } catch (const std::exception& e) {
    c->result = fail(Result::kSystemError, "creating the device backend %s failed: %s", value.c_str(), e.what());
  } catch (...) {
    c->result = fail(Result::kInternalError, "creating the device backend %s failed with an exception", value.c_str());
  }
  if (c->result == Result::kSuccess && backend == nullptr) {
    c->result = fail(Result::kInternalError, "the device backend %s was created as NULL", value.c_str());
  }
  if (c->result != Result::kSuccess) {
    c->message = lastQuietError();
    return c;
  }
  c->backend = backend.release();
  MIXCCL_INFO(log::kInit, "device backend %s (vendor %s, wire id 0x%x) chosen by %s=%s", c->backend->name(),
              c->backend->vendor(), c->backend->wireId(), config::name(config::Knob::kDeviceBackend),
              value.empty() ? "host" : value.c_str());
  return c;
}

}  // namespace

Result processBackend(DeviceBackend** out) {
  // A function-local static is initialised once even under concurrent first calls; later callers
  // wait for the first. choose() does not throw (it catches), so the creation is never retried.
  static Choice* const choice = choose();
  *out = choice->backend;
  if (choice->result != Result::kSuccess) return fail(choice->result, "%s", choice->message.c_str());
  return Result::kSuccess;
}

}  // namespace mixccl
