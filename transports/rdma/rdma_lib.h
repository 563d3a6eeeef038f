// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// libibverbs and librdmacm, opened with dlopen() the first time a rank looks for an RDMA device
// (as NCCL does): libmixccl.so does not depend on them, so it loads on machines without them, and
// processes on machines without an RDMA device never map them. Only the headers are needed to
// build. The data-path verbs (ibv_post_send, ibv_post_recv, ibv_poll_cq) are inline calls through
// the device context and need no symbol.
//
// Thread-safety: rdmaLib() may be called from any thread; the table is immutable once loaded and
// the libraries are never closed.

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <string>

namespace mixccl {

struct RdmaLib {
  // libibverbs
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  int (*queryPortCompat)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int vector);
  ibv_comp_channel* (*createCompChannel)(ibv_context* context);
  int (*destroyCompChannel)(ibv_comp_channel* channel);
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(ibv_cq* cq, unsigned int n);
  int (*destroyCq)(ibv_cq* cq);
  const char* (*wcStatusStr)(ibv_wc_status status);
  // librdmacm
  rdma_event_channel* (*createEventChannel)();
  void (*destroyEventChannel)(rdma_event_channel* channel);
  int (*createId)(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps);
  int (*destroyId)(rdma_cm_id* id);
  int (*bindAddr)(rdma_cm_id* id, sockaddr* addr);
  int (*listen)(rdma_cm_id* id, int backlog);
  int (*resolveAddr)(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeoutMs);
  int (*resolveRoute)(rdma_cm_id* id, int timeoutMs);
  int (*connect)(rdma_cm_id* id, rdma_conn_param* param);
  int (*accept)(rdma_cm_id* id, rdma_conn_param* param);
  int (*reject)(rdma_cm_id* id, const void* privateData, uint8_t length);
  int (*disconnect)(rdma_cm_id* id);
  int (*setOption)(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen);
  int (*getCmEvent)(rdma_event_channel* channel, rdma_cm_event** event);
  int (*ackCmEvent)(rdma_cm_event* event);
  int (*createQp)(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);
  void (*destroyQp)(rdma_cm_id* id);
  const char* (*eventStr)(rdma_cm_event_type event);

  // ibv_query_port as verbs.h's inline wrapper does it: the extended query where the provider
  // has one, else the exported compatibility entry point.
  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;
};

// The loaded table, or nullptr with `*why` saying what is missing (library or symbol).
const RdmaLib* rdmaLib(std::string* why);
// The table once rdmaLib() succeeded: every RDMA resource exists only after that.
const RdmaLib& rdma();

}  // namespace mixccl
