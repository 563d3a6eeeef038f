// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The device backend plugin loader and the adapter from the C table to DeviceBackend.
//
// This is the one place below src/api that speaks NCCL's C types: the plugin ABI is defined in
// them (ncclResult_t, ncclDataType_t, ncclRedOp_t), and the static_asserts below pin the
// numbering the translation relies on.

#include "src/device/plugin/plugin_loader.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "common/log.h"
#include "mixccl/device_backend.h"

namespace mixccl {

// The translation casts enum values; these make a renumbering on either side a build error.
static_assert(static_cast<int>(DataType::kInt8) == ncclInt8 && static_cast<int>(DataType::kUint8) == ncclUint8 &&
              static_cast<int>(DataType::kInt32) == ncclInt32 && static_cast<int>(DataType::kUint32) == ncclUint32 &&
              static_cast<int>(DataType::kInt64) == ncclInt64 && static_cast<int>(DataType::kUint64) == ncclUint64 &&
              static_cast<int>(DataType::kFloat16) == ncclFloat16 &&
              static_cast<int>(DataType::kFloat32) == ncclFloat32 &&
              static_cast<int>(DataType::kFloat64) == ncclFloat64 &&
              static_cast<int>(DataType::kBfloat16) == ncclBfloat16 &&
              static_cast<int>(DataType::kFloat8e4m3) == ncclFloat8e4m3 &&
              static_cast<int>(DataType::kFloat8e5m2) == ncclFloat8e5m2 && kNumDataTypes == ncclNumTypes);
static_assert(static_cast<int>(RedOpKind::kSum) == ncclSum && static_cast<int>(RedOpKind::kProd) == ncclProd &&
              static_cast<int>(RedOpKind::kMax) == ncclMax && static_cast<int>(RedOpKind::kMin) == ncclMin &&
              static_cast<int>(RedOpKind::kAvg) == ncclAvg && kNumBuiltinOps == ncclNumOps);
static_assert(static_cast<int>(Result::kSuccess) == ncclSuccess &&
              static_cast<int>(Result::kUnhandledDeviceError) == ncclUnhandledCudaError &&
              static_cast<int>(Result::kSystemError) == ncclSystemError &&
              static_cast<int>(Result::kInternalError) == ncclInternalError &&
              static_cast<int>(Result::kInvalidArgument) == ncclInvalidArgument &&
              static_cast<int>(Result::kInvalidUsage) == ncclInvalidUsage &&
              static_cast<int>(Result::kRemoteError) == ncclRemoteError &&
              static_cast<int>(Result::kInProgress) == ncclInProgress);
static_assert(kCapAsync == MIXCCL_DEVICE_CAP_ASYNC && kCapRneRounding == MIXCCL_DEVICE_CAP_RNE_ROUNDING &&
              kCapFp8Saturate == MIXCCL_DEVICE_CAP_FP8_SATURATE && kCapHostMemory == MIXCCL_DEVICE_CAP_HOST_MEMORY &&
              kCapSharesHostCores == MIXCCL_DEVICE_CAP_SHARES_HOST_CORES);
static_assert(sizeof(ReduceSpec::scalar) == sizeof(mixcclReduceSpec_v1_t::scalar));

namespace {

// The newest major version this loader knows, and how far up it looks for tables it does not
// know (to say "too new" instead of "not a plugin").
constexpr int kNewestKnownMajor = 1;
constexpr int kNewestProbedMajor = 16;

std::string symbolName(int major) { return "mixcclDeviceBackend_v" + std::to_string(major); }

// dlclose()s on scope exit unless released.
class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* get() const { return handle_; }
  void* release() {
    void* h = handle_;
    handle_ = nullptr;
    return h;
  }

 private:
  void* handle_;
};

class PluginBackend final : public DeviceBackend {
 public:
  PluginBackend(std::string path, void* library, const mixcclDeviceBackend_v1_t& table, uint32_t wireId,
                BackendCaps caps, int device)
      : path_(std::move(path)), library_(library), t_(table), wireId_(wireId), caps_(caps), device_(device) {}

  ~PluginBackend() override {
    // Nothing to report to: a failing finalize is logged, the library is closed regardless.
    if (t_.finalize() != ncclSuccess) {
      MIXCCL_WARN("device backend plugin %s (%s): finalize failed: %s", t_.name, path_.c_str(), pluginMessage());
    }
    dlclose(library_);
  }

  const char* name() const override { return t_.name; }
  const char* vendor() const override { return t_.vendor; }
  uint32_t wireId() const override { return wireId_; }
  BackendCaps caps() const override { return caps_; }
  int deviceIndex() const override { return device_; }

  MemKind memKind(const void* ptr) const override {
    switch (t_.memKind(ptr)) {
      case mixcclMemHost:
        return MemKind::kHost;
      case mixcclMemDevice:
        return MemKind::kDevice;
      default:
        return MemKind::kUnknown;
    }
  }
  Result checkStream(void* stream) const override { return check(t_.checkStream(stream), "checkStream"); }

  Result alloc(size_t bytes, void** ptr) override { return check(t_.alloc(bytes, ptr), "alloc"); }
  Result free(void* ptr) override { return check(t_.free(ptr), "free"); }
  Result allocStaging(size_t bytes, void** ptr) override { return check(t_.allocStaging(bytes, ptr), "allocStaging"); }
  Result freeStaging(void* ptr) override { return check(t_.freeStaging(ptr), "freeStaging"); }
  Result registerHost(void* ptr, size_t bytes, HostRegistration** reg) override {
    *reg = nullptr;
    if (t_.registerHost == nullptr) return Result::kSuccess;  // the plugin needs no registration
    void* h = nullptr;
    MIXCCL_TRY(check(t_.registerHost(ptr, bytes, &h), "registerHost"));
    *reg = static_cast<HostRegistration*>(h);
    return Result::kSuccess;
  }
  Result unregisterHost(HostRegistration* reg) override {
    if (reg == nullptr) return Result::kSuccess;
    return check(t_.unregisterHost(reg), "unregisterHost");
  }

  Result openQueue(void* userStream, WorkQueue** queue) override {
    void* h = nullptr;
    MIXCCL_TRY(check(t_.openQueue(userStream, &h), "openQueue"));
    *queue = static_cast<WorkQueue*>(h);
    return Result::kSuccess;
  }
  Result closeQueue(WorkQueue* queue) override {
    if (queue == nullptr) return Result::kSuccess;
    return check(t_.closeQueue(queue), "closeQueue");
  }

  Result copy(void* dst, const void* src, size_t bytes, WorkQueue* queue) override {
    return check(t_.copy(dst, src, bytes, queue), "copy");
  }
  Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                bool applyPost, WorkQueue* queue) override {
    if (!(caps_.dtypes & (1u << static_cast<int>(spec.dtype))) || !(caps_.ops & (1u << static_cast<int>(spec.op)))) {
      return fail(Result::kInvalidArgument,
                  "device backend plugin %s (%s) cannot reduce %s with %s (its capabilities: dtypes 0x%x, ops 0x%x); "
                  "use a type and operator it announces, or another MIXCCL_DEVICE_BACKEND",
                  t_.name, path_.c_str(), dataTypeName(spec.dtype), redOpName(spec.op), caps_.dtypes, caps_.ops);
    }
    mixcclReduceSpec_v1_t c{};
    c.dtype = static_cast<ncclDataType_t>(spec.dtype);
    c.op = static_cast<ncclRedOp_t>(spec.op);
    c.preMul = spec.preMul ? 1 : 0;
    memcpy(c.scalar, spec.scalar, sizeof(c.scalar));
    c.divisor = spec.divisor;
    c.applyPre = applyPre ? 1 : 0;
    c.applyPost = applyPost ? 1 : 0;
    // The rank's own input (b) goes last: pre() applies to the last source only.
    const void* srcs[2] = {a, b};
    const int n = a != nullptr ? 2 : 1;
    return check(t_.reduce(dst, a != nullptr ? srcs : srcs + 1, n, count, &c, queue), "reduce");
  }

  Result record(WorkQueue* queue, Fence** fence) override {
    void* h = nullptr;
    MIXCCL_TRY(check(t_.record(queue, &h), "record"));
    *fence = static_cast<Fence*>(h);
    return Result::kSuccess;
  }
  Result markStart(void* stream, Fence** fence) override {
    void* h = nullptr;
    MIXCCL_TRY(check(t_.markStart(stream, &h), "markStart"));
    *fence = static_cast<Fence*>(h);
    return Result::kSuccess;
  }
  Result query(Fence* fence) override {
    if (fence == nullptr) return Result::kSuccess;
    return check(t_.query(fence), "query");
  }
  void releaseFence(Fence* fence) override {
    if (fence != nullptr) t_.releaseFence(fence);
  }
  Result holdStream(void* stream, StreamGate** gate) override {
    void* h = nullptr;
    MIXCCL_TRY(check(t_.holdStream(stream, &h), "holdStream"));
    *gate = static_cast<StreamGate*>(h);
    return Result::kSuccess;
  }
  Result releaseStream(StreamGate* gate) override {
    if (gate == nullptr) return Result::kSuccess;
    return check(t_.releaseStream(gate), "releaseStream");
  }

 private:
  const char* pluginMessage() const {
    const char* m = t_.getLastError != nullptr ? t_.getLastError() : nullptr;
    return m != nullptr && *m != '\0' ? m : "(the plugin gave no message)";
  }

  // ncclResult_t -> Result, recording the plugin's message with the failing function's name.
  Result check(ncclResult_t r, const char* fn) const {
    const int code = static_cast<int>(r);
    if (code == ncclSuccess || code == ncclInProgress) return static_cast<Result>(code);
    if (code > ncclSuccess && code < ncclInProgress) {
      return fail(static_cast<Result>(code), "device backend plugin %s (%s): %s failed: %s", t_.name, path_.c_str(), fn,
                  pluginMessage());
    }
    return fail(Result::kInternalError,
                "device backend plugin %s (%s): %s returned %d, which is not an ncclResult_t; the plugin is broken",
                t_.name, path_.c_str(), fn, code);
  }

  const std::string path_;
  void* const library_;
  const mixcclDeviceBackend_v1_t t_;  // a copy: the plugin's table may be read-only or reused
  const uint32_t wireId_;
  const BackendCaps caps_;
  const int device_;
};

// The Result for an error a plugin returned; anything that is no ncclResult_t error is a bug.
Result errorCode(ncclResult_t r) {
  const int code = static_cast<int>(r);
  return code > ncclSuccess && code < ncclInProgress ? static_cast<Result>(code) : Result::kInternalError;
}

const char* tableMessage(const mixcclDeviceBackend_v1_t& t) {
  const char* m = t.getLastError != nullptr ? t.getLastError() : nullptr;
  return m != nullptr && *m != '\0' ? m : "(the plugin gave no message)";
}

// Checks a v1 table (size, version, mandatory fields) and copies it into *out.
Result readTableV1(const char* path, const void* symbol, mixcclDeviceBackend_v1_t* out) {
  const char* sym = MIXCCL_DEVICE_BACKEND_V1_SYMBOL;
  size_t size = 0;
  memcpy(&size, symbol, sizeof(size));
  constexpr size_t kHeaderBytes = offsetof(mixcclDeviceBackend_v1_t, version) + sizeof(uint32_t);
  if (size < sizeof(mixcclDeviceBackend_v1_t)) {
    uint32_t version = 0;
    if (size >= kHeaderBytes)
      memcpy(&version, static_cast<const char*>(symbol) + offsetof(mixcclDeviceBackend_v1_t, version), 4);
    return fail(Result::kInvalidUsage,
                "device backend plugin %s: %s says its size is %zu bytes (version %u.%u), less than the %zu bytes of "
                "version 1.0: rebuild the plugin against include/mixccl/device_backend.h of this mixccl",
                path, sym, size, MIXCCL_DEVICE_BACKEND_MAJOR(version), MIXCCL_DEVICE_BACKEND_MINOR(version),
                sizeof(mixcclDeviceBackend_v1_t));
  }
  // A larger size is a newer minor version: its extra fields are appended and ignored here.
  memcpy(out, symbol, sizeof(*out));
  const uint32_t major = MIXCCL_DEVICE_BACKEND_MAJOR(out->version);
  if (major != 1) {
    return fail(Result::kInvalidUsage,
                "device backend plugin %s: %s declares ABI version %u.%u, but this mixccl supports device backend ABI "
                "version %d.x (%s); use a plugin built for this mixccl",
                path, sym, major, MIXCCL_DEVICE_BACKEND_MINOR(out->version), kNewestKnownMajor,
                major > 1 ? "the plugin is newer" : "the version does not match the symbol");
  }
  if (out->name == nullptr || *out->name == '\0' || out->vendor == nullptr || *out->vendor == '\0') {
    return fail(Result::kInvalidUsage, "device backend plugin %s: %s has no name or no vendor", path, sym);
  }
  struct Field {
    const char* name;
    bool present;
  };
  const Field mandatory[] = {
      {"init", out->init != nullptr},
      {"finalize", out->finalize != nullptr},
      {"getCaps", out->getCaps != nullptr},
      {"memKind", out->memKind != nullptr},
      {"checkStream", out->checkStream != nullptr},
      {"alloc", out->alloc != nullptr},
      {"free", out->free != nullptr},
      {"allocStaging", out->allocStaging != nullptr},
      {"freeStaging", out->freeStaging != nullptr},
      {"openQueue", out->openQueue != nullptr},
      {"closeQueue", out->closeQueue != nullptr},
      {"copy", out->copy != nullptr},
      {"reduce", out->reduce != nullptr},
      {"record", out->record != nullptr},
      {"markStart", out->markStart != nullptr},
      {"query", out->query != nullptr},
      {"releaseFence", out->releaseFence != nullptr},
      {"holdStream", out->holdStream != nullptr},
      {"releaseStream", out->releaseStream != nullptr},
  };
  for (const Field& f : mandatory) {
    if (!f.present) {
      return fail(Result::kInvalidUsage,
                  "device backend plugin %s (%s): the mandatory function %s in %s is NULL; the plugin is incomplete",
                  path, out->name, f.name, sym);
    }
  }
  if ((out->registerHost == nullptr) != (out->unregisterHost == nullptr)) {
    return fail(Result::kInvalidUsage,
                "device backend plugin %s (%s): registerHost and unregisterHost must both be set or both be NULL", path,
                out->name);
  }
  if (out->wireId != 0 && out->wireId < MIXCCL_DEVICE_BACKEND_FIRST_PLUGIN_WIRE_ID) {
    return fail(Result::kInvalidUsage,
                "device backend plugin %s (%s): wire id 0x%x is reserved for built-in backends (plugins use 0x%x and "
                "up, or 0)",
                path, out->name, out->wireId, MIXCCL_DEVICE_BACKEND_FIRST_PLUGIN_WIRE_ID);
  }
  return Result::kSuccess;
}

// Finds the newest table the loader knows; explains what is there when none is.
Result findTable(const char* path, void* library, int* major, const void** table) {
  for (int v = kNewestKnownMajor; v >= 1; --v) {
    dlerror();
    const void* sym = dlsym(library, symbolName(v).c_str());
    if (sym != nullptr) {
      *major = v;
      *table = sym;
      return Result::kSuccess;
    }
  }
  const char* err = dlerror();
  const std::string why = err != nullptr ? err : "symbol is NULL";
  for (int v = kNewestProbedMajor; v > kNewestKnownMajor; --v) {
    if (dlsym(library, symbolName(v).c_str()) != nullptr) {
      return fail(Result::kInvalidUsage,
                  "device backend plugin %s offers only %s (ABI version %d); this mixccl supports device backend ABI "
                  "version %d (%s): use a plugin that also exports that, or a newer mixccl",
                  path, symbolName(v).c_str(), v, kNewestKnownMajor, symbolName(kNewestKnownMajor).c_str());
    }
  }
  return fail(Result::kInvalidUsage,
              "device backend plugin %s has no table symbol %s (%s): is it a mixccl device backend plugin, "
              "exported with default visibility?",
              path, symbolName(kNewestKnownMajor).c_str(), why.c_str());
}

}  // namespace

Result loadPluginBackend(const char* path, std::unique_ptr<DeviceBackend>* out) {
  if (out == nullptr) return fail(Result::kInternalError, "loadPluginBackend: out is NULL");
  if (path == nullptr || *path == '\0') {
    return fail(Result::kInvalidArgument, "device backend plugin: the path is empty");
  }
  dlerror();
  Library lib(dlopen(path, RTLD_NOW | RTLD_LOCAL));
  if (lib.get() == nullptr) {
    const char* err = dlerror();
    return fail(Result::kInvalidUsage, "cannot load device backend plugin %s: %s; check MIXCCL_DEVICE_BACKEND", path,
                err != nullptr ? err : "dlopen failed");
  }
  int major = 0;
  const void* symbol = nullptr;
  MIXCCL_TRY(findTable(path, lib.get(), &major, &symbol));
  // Only v1 exists; a v2 adds a branch here that fills a v2 adapter.
  mixcclDeviceBackend_v1_t table;
  MIXCCL_TRY(readTableV1(path, symbol, &table));

  ncclResult_t r = table.init(0);
  if (r != ncclSuccess) {
    return fail(errorCode(r), "device backend plugin %s (%s, vendor %s): init failed (code %d): %s", path, table.name,
                table.vendor, static_cast<int>(r), tableMessage(table));
  }
  // From here a failure must finalize what init set up.
  mixcclDeviceCaps_v1_t caps{};
  int device = 0;
  r = table.getCaps(&caps);
  if (r == ncclSuccess && table.deviceIndex != nullptr) r = table.deviceIndex(&device);
  if (r != ncclSuccess) {
    std::string msg = tableMessage(table);
    (void)table.finalize();
    return fail(errorCode(r), "device backend plugin %s (%s): getCaps/deviceIndex failed (code %d): %s", path,
                table.name, static_cast<int>(r), msg.c_str());
  }
  BackendCaps c;
  c.dtypes = caps.dtypes;
  c.ops = caps.ops;
  c.flags = caps.flags;
  const uint32_t wireId = table.wireId != 0 ? table.wireId : MIXCCL_DEVICE_BACKEND_FIRST_PLUGIN_WIRE_ID;
  try {
    *out = std::make_unique<PluginBackend>(path, lib.get(), table, wireId, c, device);
  } catch (...) {
    (void)table.finalize();
    return fail(Result::kSystemError, "device backend plugin %s: out of memory wrapping the plugin", path);
  }
  lib.release();  // the adapter owns the library now
  MIXCCL_INFO(log::kInit,
              "device backend plugin %s loaded from %s: vendor %s, ABI %u.%u, wire id 0x%x, dtypes 0x%x, ops 0x%x, "
              "flags 0x%x, device %d",
              table.name, path, table.vendor, MIXCCL_DEVICE_BACKEND_MAJOR(table.version),
              MIXCCL_DEVICE_BACKEND_MINOR(table.version), wireId, c.dtypes, c.ops, c.flags, device);
  return Result::kSuccess;
}

}  // namespace mixccl
