// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

#include "transports/rdma/rdma_lib.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>

namespace mixccl {
namespace {

RdmaLib gLib{};
std::string gWhy;
bool gLoaded = false;
pid_t gLoader = 0;  // the process that loaded the libraries (and whose device contexts they keep)

// Fills `*fn` from `handle`; false (and gWhy) when the symbol is missing.
template <typename Fn>
bool bind(void* handle, const char* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr) gWhy = std::string(lib) + " has no " + name + " (too old?)";
  return *fn != nullptr;
}

// dlopen() of `lib`; nullptr (and gWhy) when it cannot be loaded. RTLD_LOCAL: the verbs symbols
// stay out of the global namespace, where an application's own copy (another NCCL, a different
// rdma-core) may live. Never closed: providers keep threads.
void* openLibrary(const char* lib, const char* package) {
  void* handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) gWhy = std::string(lib) + " cannot be loaded (" + dlerror() + "; Debian: " + package + ")";
  return handle;
}

void load() {
  gLoader = getpid();
  void* verbs = openLibrary("libibverbs.so.1", "ibverbs-providers");
  void* cm = verbs == nullptr ? nullptr : openLibrary("librdmacm.so.1", "librdmacm1");
  if (cm == nullptr) return;
  RdmaLib& l = gLib;
  const char* v = "libibverbs";
  const char* r = "librdmacm";
  gLoaded = bind(verbs, v, "ibv_get_device_list", &l.getDeviceList) &&
            bind(verbs, v, "ibv_free_device_list", &l.freeDeviceList) &&
            bind(verbs, v, "ibv_get_device_name", &l.getDeviceName) &&
            bind(verbs, v, "ibv_query_port", &l.queryPortCompat) && bind(verbs, v, "ibv_query_gid", &l.queryGid) &&
            bind(verbs, v, "ibv_query_device", &l.queryDevice) && bind(verbs, v, "ibv_alloc_pd", &l.allocPd) &&
            bind(verbs, v, "ibv_dealloc_pd", &l.deallocPd) && bind(verbs, v, "ibv_reg_mr", &l.regMr) &&
            bind(verbs, v, "ibv_dereg_mr", &l.deregMr) && bind(verbs, v, "ibv_create_cq", &l.createCq) &&
            bind(verbs, v, "ibv_create_comp_channel", &l.createCompChannel) &&
            bind(verbs, v, "ibv_destroy_comp_channel", &l.destroyCompChannel) &&
            bind(verbs, v, "ibv_get_cq_event", &l.getCqEvent) && bind(verbs, v, "ibv_ack_cq_events", &l.ackCqEvents) &&
            bind(verbs, v, "ibv_destroy_cq", &l.destroyCq) && bind(verbs, v, "ibv_wc_status_str", &l.wcStatusStr) &&
            bind(cm, r, "rdma_create_event_channel", &l.createEventChannel) &&
            bind(cm, r, "rdma_destroy_event_channel", &l.destroyEventChannel) &&
            bind(cm, r, "rdma_create_id", &l.createId) && bind(cm, r, "rdma_destroy_id", &l.destroyId) &&
            bind(cm, r, "rdma_bind_addr", &l.bindAddr) && bind(cm, r, "rdma_listen", &l.listen) &&
            bind(cm, r, "rdma_resolve_addr", &l.resolveAddr) && bind(cm, r, "rdma_resolve_route", &l.resolveRoute) &&
            bind(cm, r, "rdma_connect", &l.connect) && bind(cm, r, "rdma_accept", &l.accept) &&
            bind(cm, r, "rdma_reject", &l.reject) && bind(cm, r, "rdma_disconnect", &l.disconnect) &&
            bind(cm, r, "rdma_set_option", &l.setOption) && bind(cm, r, "rdma_get_cm_event", &l.getCmEvent) &&
            bind(cm, r, "rdma_ack_cm_event", &l.ackCmEvent) && bind(cm, r, "rdma_create_qp", &l.createQp) &&
            bind(cm, r, "rdma_destroy_qp", &l.destroyQp) && bind(cm, r, "rdma_event_str", &l.eventStr);
}

}  // namespace

int RdmaLib::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (vctx != nullptr) return vctx->query_port(context, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  return queryPortCompat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

const RdmaLib* rdmaLib(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load);
  if (gLoaded && getpid() != gLoader) {
    // librdmacm keeps the device contexts its first user opened, on that process's uverbs files:
    // a forked child's queue pairs would land there and fail (EPERM) at the first post.
    if (why != nullptr) *why = "this process was forked after its parent opened RDMA devices (librdmacm keeps them)";
    return nullptr;
  }
  if (!gLoaded && why != nullptr) *why = gWhy;
  return gLoaded ? &gLib : nullptr;
}

const RdmaLib& rdma() { return gLib; }

}  // namespace mixccl
