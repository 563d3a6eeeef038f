// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Which RDMA devices (rails) a rank uses. rdma_cm addresses devices by IP: an id bound to an
// interface's address is tied to the RDMA device behind that interface (id->verbs), or to none.
// So every IPv4 interface that is up and not loopback is tried in turn; the first address of each
// device that NCCL_IB_HCA admits and whose port is active gets a listener. rdma_cm then picks
// the GID for that address by itself (RoCE v2 for IPv4); NCCL_IB_GID_INDEX instead names the GID,
// whose IPv4 address is then the one bound.

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "common/name_filter.h"
#include "transports/rdma/rdma_internal.h"
#include "transports/rdma/rdma_presence.h"

namespace mixccl {
namespace {

constexpr int kListenBacklog = 256;

// NCCL_IB_GID_INDEX names a GID; on RoCE v2 over IPv4 that GID is the IPv4-mapped address
// (::ffff:a.b.c.d) of one of the device's interfaces. rdma_cm addresses devices by IP, so the GID
// index picks which address to bind: true when `addr` is the one GID `index` holds.
bool gidIsAddress(ibv_context* verbs, int port, int index, const sockaddr_in& addr) {
  ibv_gid gid{};
  if (rdma().queryGid(verbs, static_cast<uint8_t>(port), index, &gid) != 0) return false;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid.raw, kMapped, sizeof(kMapped)) == 0 && memcmp(gid.raw + 12, &addr.sin_addr, 4) == 0;
}

bool sameDevice(const std::vector<RdmaDevice>& devices, const ibv_context* verbs, int port) {
  for (const RdmaDevice& d : devices) {
    if (d.verbs == verbs && d.port == port) return true;
  }
  return false;
}

}  // namespace

std::string rdmaAddrString(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

Result openRdmaDevices(RdmaHub* hub, std::vector<uint8_t>* blob, std::string* why) {
  blob->clear();
  if (!anyRdmaDevice()) {
    *why = "no RDMA device found";
    return Result::kSuccess;
  }
  std::string missing;
  if (rdmaLib(&missing) == nullptr) {
    *why = "RDMA devices exist, but " + missing;
    return Result::kSuccess;
  }
  int count = 0;
  ibv_device** list = rdma().getDeviceList(&count);
  if (list != nullptr) rdma().freeDeviceList(list);
  if (list == nullptr || count == 0) {
    *why = "no RDMA device found";
    return Result::kSuccess;
  }
  hub->channel = rdma().createEventChannel();
  if (hub->channel == nullptr) {
    *why = std::string("rdma_create_event_channel failed (") + strerror(errno) + ")";
    return Result::kSuccess;
  }
  const int flags = fcntl(hub->channel->fd, F_GETFL);
  if (flags < 0 || fcntl(hub->channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return fail(Result::kSystemError, "rdma: cannot make the event channel non-blocking: %s", strerror(errno));
  }
  const std::string& spec = config::getString(config::Knob::kIbHca);
  const NameFilter filter = NameFilter::parse(spec, /*withPorts=*/true);
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) {
    *why = std::string("getifaddrs failed (") + strerror(errno) + ")";
    return Result::kSuccess;
  }
  const int64_t gidIndex = config::getInt(config::Knob::kIbGidIndex);
  *why = filter.useDefault ? "no active RDMA port has an IPv4 address"
                           : "no active RDMA port that NCCL_IB_HCA=" + spec + " admits has an IPv4 address";
  if (gidIndex >= 0) *why += " at GID index " + std::to_string(gidIndex) + " (NCCL_IB_GID_INDEX)";
  std::string used;
  for (const ifaddrs* ifa = ifs; ifa != nullptr && hub->devices.size() < kRdmaMaxRails; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK) != 0) continue;
    rdma_cm_id* id = nullptr;
    if (rdma().createId(hub->channel, &id, nullptr, RDMA_PS_TCP) != 0) continue;
    sockaddr_in addr = *reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
    addr.sin_port = 0;
    bool keep = false;
    if (rdma().bindAddr(id, reinterpret_cast<sockaddr*>(&addr)) == 0 && id->verbs != nullptr &&
        !sameDevice(hub->devices, id->verbs, id->port_num)) {
      const char* dev = rdma().getDeviceName(id->verbs->device);
      ibv_port_attr port{};
      const bool active = rdma().queryPort(id->verbs, id->port_num, &port) == 0 && port.state == IBV_PORT_ACTIVE;
      const bool gidOk = gidIndex < 0 || gidIsAddress(id->verbs, id->port_num, static_cast<int>(gidIndex), addr);
      if (active && gidOk && (filter.useDefault || filter.accepts(dev, id->port_num)) &&
          rdma().listen(id, kListenBacklog) == 0) {
        RdmaDevice d;
        d.name = dev;
        d.port = id->port_num;
        d.verbs = id->verbs;
        d.listener = id;
        d.addr = *reinterpret_cast<const sockaddr_in*>(rdma_get_local_addr(id));
        d.pd = rdma().allocPd(id->verbs);
        d.completions = d.pd == nullptr ? nullptr : rdma().createCompChannel(id->verbs);
        const int fl = d.completions == nullptr ? -1 : fcntl(d.completions->fd, F_GETFL);
        if (d.pd == nullptr || d.completions == nullptr || fl < 0 ||
            fcntl(d.completions->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
          MIXCCL_WARN("rdma: setting up %s failed (protection domain, completion channel): %s; not using it", dev,
                      strerror(errno));
          if (d.completions != nullptr) rdma().destroyCompChannel(d.completions);
          if (d.pd != nullptr) rdma().deallocPd(d.pd);
        } else {
          keep = true;
          used += " [" + std::to_string(hub->devices.size()) + "]" + d.name + ":" + std::to_string(d.port) + "/" +
                  (port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB") + " (OOB " + ifa->ifa_name + ":" +
                  rdmaAddrString(d.addr) + ")";
          uint8_t entry[kRdmaBlobEntryBytes] = {};
          memcpy(entry, &d.addr.sin_addr, 4);
          memcpy(entry + 4, &d.addr.sin_port, 2);
          entry[6] = static_cast<uint8_t>(d.port);
          blob->insert(blob->end(), entry, entry + sizeof(entry));
          hub->devices.push_back(d);
        }
      }
    }
    if (!keep) rdma().destroyId(id);
  }
  freeifaddrs(ifs);
  if (!hub->devices.empty()) MIXCCL_INFO(log::kNet | log::kInit, "NET/IB : Using%s", used.c_str());
  return Result::kSuccess;
}

}  // namespace mixccl
