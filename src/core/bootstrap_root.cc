// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// The unique id and the bootstrap root.
//
// The root is one detached thread per job. It owns a listener and polls it together with every
// connection it accepted, so a silent or slow client never holds up the others. A connection is
// "pending" until its 64-byte hello has arrived and checks out; only then does it take a rank
// slot. Garbage, a wrong secret or a stale job's commHash close the connection (logged at WARN)
// without touching any slot; a well-formed hello that conflicts with the job (duplicate rank,
// other nranks, rank out of range) gets an error reply first, so that rank fails with a clear
// message. When all slots are taken, every rank receives the address table and the thread exits.
// At the deadline it tells the registered ranks who is missing and exits.
//
// Out of descriptors (EMFILE/ENFILE), accept fails while the listener stays readable, so the root
// stops polling the listener for a back-off that doubles up to a second, and warns at most every
// 10 s with the limit to raise. When it then gives up, it hands back a spare descriptor held for
// this, answers the ranks still queued on the listener too, and every rank's error names the
// open-file limit rather than a wrong unique id.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/limits.h"
#include "common/log.h"
#include "src/core/bootstrap.h"
#include "src/core/bootstrap_wire.h"

namespace mixccl {

namespace bootstrap {

int readAvailable(int fd, void* data, size_t bytes, size_t* done) {
  uint8_t* p = static_cast<uint8_t*>(data);
  while (*done < bytes) {
    ssize_t n = ::recv(fd, p + *done, bytes - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
    } else if (n == 0) {
      return -1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

int writeAvailable(int fd, const void* data, size_t bytes, size_t* done) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (*done < bytes) {
    ssize_t n = ::send(fd, p + *done, bytes - *done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      *done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else if (n < 0 && errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

namespace {

// A client must deliver its hello this soon after connecting; real ranks send it at once.
constexpr auto kHelloTimeout = std::chrono::seconds(10);
// Unverified connections beyond this many are closed, oldest first (a flood cannot exhaust fds).
constexpr size_t kMaxPending = 1024;
// After a failed accept the listener is left alone this long, doubling per failure up to the max.
constexpr auto kMinAcceptBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxAcceptBackoff = std::chrono::milliseconds(1000);
// At most one warning about failing accepts per interval (the first one at once).
constexpr auto kAcceptWarnInterval = std::chrono::seconds(10);
// When giving up, time spent answering ranks still queued on the listener. Ranks wait one second
// past their deadline (bootstrap.cc), which falls after ours, for this answer.
constexpr auto kQueueAnswerBudget = std::chrono::milliseconds(500);

// A descriptor (on /dev/null) kept in reserve: when the process has run out, closing it lets the
// root accept one more connection, to tell a queued rank why the job failed.
class ReserveFd {
 public:
  ReserveFd() : fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {}
  ~ReserveFd() { release(); }
  ReserveFd(const ReserveFd&) = delete;
  ReserveFd& operator=(const ReserveFd&) = delete;
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// The roots this process runs, by commHash, while they wait for registrations: the process that
// made an id (a split's or shrink's child rank 0) may learn before its root can that the job will
// never be complete, and cancelRoot() then tells the ranks waiting there at once. Leaked on
// purpose: detached root threads may outlive static destruction.
struct CancelState {
  std::mutex mutex;
  bool requested = false;
  std::string why;
};

struct RootRegistry {
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<CancelState>> roots;
};

RootRegistry& rootRegistry() {
  static RootRegistry* registry = new RootRegistry();
  return *registry;
}

struct RootConn {
  Socket sock;
  SocketAddress from;
  Clock::time_point opened;
  uint8_t hello[Hello::kBytes] = {};
  size_t got = 0;
};

class Root {
 public:
  Root(Socket listener, SocketAddress addr, uint64_t commHash, const uint8_t secret[16])
      : listener_(std::move(listener)),
        addr_(addr),
        commHash_(commHash),
        deadline_(defaultDeadline()),
        cancel_(std::make_shared<CancelState>()) {
    memcpy(secret_, secret, 16);
    RootRegistry& registry = rootRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.roots[commHash_] = cancel_;
  }
  ~Root() {
    RootRegistry& registry = rootRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto it = registry.roots.find(commHash_);
    if (it != registry.roots.end() && it->second == cancel_) registry.roots.erase(it);
  }

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      MIXCCL_WARN("bootstrap root %s: stopped by an internal error: %s", addr_.toString().c_str(), e.what());
    } catch (...) {
      MIXCCL_WARN("bootstrap root %s: stopped by an unknown internal error", addr_.toString().c_str());
    }
  }

 private:
  void serve() {
    MIXCCL_INFO(log::kBootstrap, "bootstrap root listening on %s", addr_.toString().c_str());
    const auto start = Clock::now();
    for (;;) {
      // A rank known to have left is never put in a table.
      if (nranks_ != 0 && registeredCount_ == nranks_) {
        noteDeparturesNow();
        if (left_.empty()) break;
      }
      if (Clock::now() >= deadline_) {
        giveUp(std::chrono::duration<double>(Clock::now() - start).count());
        return;
      }
      std::string why;
      if (cancelled(&why)) {
        MIXCCL_WARN("bootstrap root %s: cancelled by the process that made its id: %s", addr_.toString().c_str(),
                    why.c_str());
      } else if (!left_.empty()) {
        why = left_;
        MIXCCL_WARN("%s", why.c_str());
      }
      if (!why.empty()) {
        for (auto& c : registered_) {
          if (c) sendError(c.get(), Result::kRemoteError, why.c_str());
        }
        answerQueued(why.c_str());
        return;
      }
      pollOnce();
    }
    distribute();
  }

  bool cancelled(std::string* why) {
    std::lock_guard<std::mutex> lock(cancel_->mutex);
    if (cancel_->requested) *why = cancel_->why;
    return cancel_->requested;
  }

  void pollOnce() {
    std::vector<pollfd> fds;
    const auto now = Clock::now();
    const bool acceptPaused = now < acceptPausedUntil_;
    fds.push_back({acceptPaused ? -1 : listener_.fd(), POLLIN, 0});  // poll skips a negative fd
    for (auto& c : pending_) fds.push_back({c->sock.fd(), POLLIN, 0});
    for (auto& c : registered_) {
      if (c) fds.push_back({c->sock.fd(), POLLIN, 0});
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count();
    if (acceptPaused) {
      left = std::min<int64_t>(left, std::chrono::ceil<std::chrono::milliseconds>(acceptPausedUntil_ - now).count());
    }
    int timeout = static_cast<int>(std::clamp<int64_t>(left, 0, 100));
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      MIXCCL_WARN("bootstrap root %s: poll failed: %s", addr_.toString().c_str(), strerror(errno));
      return;
    }
    noteDepartures(fds, 1 + pending_.size());
    // Pending connections: read what arrived; decide once a whole hello is here.
    std::vector<std::unique_ptr<RootConn>> still;
    for (size_t k = 0; k < pending_.size(); ++k) {
      std::unique_ptr<RootConn> c = std::move(pending_[k]);
      if (fds[1 + k].revents != 0) {
        int err = readAvailable(c->sock.fd(), c->hello, Hello::kBytes, &c->got);
        if (err != 0) {
          MIXCCL_INFO(log::kBootstrap, "bootstrap root %s: connection from %s closed before its hello (%s)",
                      addr_.toString().c_str(), c->from.toString().c_str(), err < 0 ? "EOF" : strerror(err));
          continue;
        }
        if (c->got == Hello::kBytes) {
          handleHello(std::move(c));
          continue;
        }
      }
      if (Clock::now() - c->opened > kHelloTimeout) {
        MIXCCL_WARN("bootstrap root %s: connection from %s sent no complete hello within %lld s; closed",
                    addr_.toString().c_str(), c->from.toString().c_str(),
                    static_cast<long long>(kHelloTimeout.count()));
        continue;
      }
      still.push_back(std::move(c));
    }
    pending_ = std::move(still);
    if (fds[0].revents != 0) acceptAll();
  }

  // Registered ranks must stay silent until the table comes; readable means closed or rogue. A
  // rank registers once, so one whose connection ends has left the job (its init failed or was
  // aborted, or its process exited) and will not come back: waiting for its slot to fill again
  // kept every other rank here until MIXCCL_TIMEOUT. serve() tells them now. `fds` holds the
  // registered connections' poll results from `first` on, in the order of registered_.
  void noteDepartures(const std::vector<pollfd>& fds, size_t first) {
    size_t i = first;
    for (size_t r = 0; r < registered_.size(); ++r) {
      if (!registered_[r]) continue;
      if (fds[i++].revents == 0 || !left_.empty()) continue;
      char why[kMaxReplyMessage];
      snprintf(why, sizeof(why),
               "bootstrap root %s: rank %zu (%s) registered and then closed its connection before all ranks "
               "registered: its init failed or was aborted, or its process exited; check its log",
               addr_.toString().c_str(), r, registered_[r]->from.toString().c_str());
      left_ = why;
      registered_[r].reset();
      --registeredCount_;
    }
  }

  // The same without waiting, for the moment every rank is registered: the last hellos may have
  // been read in the pass that polled before them, so a close after them is not in that poll.
  void noteDeparturesNow() {
    std::vector<pollfd> fds;
    for (auto& c : registered_) {
      if (c) fds.push_back({c->sock.fd(), POLLIN, 0});
    }
    if (!fds.empty() && poll(fds.data(), fds.size(), 0) > 0) noteDepartures(fds, 0);
  }

  void acceptAll() {
    for (;;) {
      auto c = std::make_unique<RootConn>();
      int err = 0;
      Result r = listener_.accept(&c->sock, &c->from, &err);
      if (r == Result::kInProgress) return;  // none left
      if (r != Result::kSuccess) {
        acceptFailed(err);
        return;
      }
      acceptBackoff_ = std::chrono::milliseconds(0);
      c->opened = Clock::now();
      if (pending_.size() >= kMaxPending) makeRoom();
      pending_.push_back(std::move(c));
    }
  }

  // Frees one place among the unidentified connections. A rank's hello may sit unread in the
  // oldest ones while this thread was busy accepting a flood (a loaded host schedules it late), so
  // what they sent is read first: a complete hello is handled, a closed connection just goes;
  // otherwise the oldest that delivered nothing at all is closed (a silent holder, never a rank
  // that wrote its hello), and only when every one holds part of a hello, the oldest of them.
  void makeRoom() {
    for (size_t k = 0; k < pending_.size(); ++k) {
      RootConn* c = pending_[k].get();
      const int err = readAvailable(c->sock.fd(), c->hello, Hello::kBytes, &c->got);
      if (err == 0 && c->got > 0 && c->got < Hello::kBytes) continue;
      std::unique_ptr<RootConn> owned = std::move(pending_[k]);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(k));
      if (err == 0 && c->got == Hello::kBytes) {
        handleHello(std::move(owned));
      } else if (err == 0) {
        MIXCCL_WARN(
            "bootstrap root %s: more than %zu unidentified connections; closing the oldest silent one (from %s)",
            addr_.toString().c_str(), kMaxPending, owned->from.toString().c_str());
      }
      return;
    }
    MIXCCL_WARN("bootstrap root %s: more than %zu unidentified connections; closing the oldest (from %s)",
                addr_.toString().c_str(), kMaxPending, pending_.front()->from.toString().c_str());
    pending_.erase(pending_.begin());
  }

  // The listener stays readable while connections wait in its queue, so an immediate retry would
  // spin: pause it, and warn once per interval with the count of failures since the last warning.
  void acceptFailed(int err) {
    const auto now = Clock::now();
    acceptErrno_ = err;
    ++acceptFailures_;
    acceptBackoff_ = std::clamp(acceptBackoff_ * 2, std::chrono::milliseconds(kMinAcceptBackoff),
                                std::chrono::milliseconds(kMaxAcceptBackoff));
    acceptPausedUntil_ = now + acceptBackoff_;
    if (acceptWarned_ && now - lastAcceptWarn_ < kAcceptWarnInterval) return;
    MIXCCL_WARN(
        "bootstrap root %s: %s (%llu failed accepts since the last report; %u of %u ranks registered; "
        "retrying until the timeout)",
        addr_.toString().c_str(), acceptCause().c_str(), static_cast<unsigned long long>(acceptFailures_),
        registeredCount_, nranks_);
    acceptWarned_ = true;
    lastAcceptWarn_ = now;
    acceptFailures_ = 0;
  }

  std::string acceptCause() const {
    std::string limit = " (RLIMIT_NOFILE soft/hard = " + fileLimitText() + ")";
    if (acceptErrno_ == EMFILE) {
      return "cannot accept rank connections: too many open files" + limit + "; raise ulimit -n";
    }
    if (acceptErrno_ == ENFILE) {
      return "cannot accept rank connections: too many open files in the system" + limit +
             "; close files or raise fs.file-max";
    }
    return std::string("cannot accept rank connections: ") + strerror(acceptErrno_);
  }

  void handleHello(std::unique_ptr<RootConn> c) {
    bool addressOk = false;
    Hello h = Hello::decode(c->hello, &addressOk);
    const std::string from = c->from.toString();
    std::string first;
    auto takenBy = [&](uint32_t rank) -> const char* {
      if (!registered_[rank]) return nullptr;
      first = registered_[rank]->from.toString();
      return first.c_str();
    };
    const RegistrationCheck check = checkRegistration(h, addressOk, commHash_, secret_, nranks_, takenBy, from.c_str());
    switch (check.verdict) {
      case RegistrationCheck::Verdict::kNotHello:
        MIXCCL_WARN(
            "bootstrap root %s: connection from %s is not a mixccl protocol-%u hello (magic 0x%08x version %u); "
            "closed",
            addr_.toString().c_str(), from.c_str(), kProtocolVersion, h.magic, h.version);
        return;
      case RegistrationCheck::Verdict::kForeignJob:
        MIXCCL_WARN(
            "bootstrap root %s: connection from %s presents another unique id (commHash 0x%016llx); closed. "
            "Is a process from an earlier or other job using this address?",
            addr_.toString().c_str(), from.c_str(), static_cast<unsigned long long>(h.commHash));
        return;
      case RegistrationCheck::Verdict::kMalformed:
        MIXCCL_WARN("bootstrap root %s: connection from %s sent a malformed registration; closed",
                    addr_.toString().c_str(), from.c_str());
        return;
      case RegistrationCheck::Verdict::kReject:
        MIXCCL_WARN("bootstrap root %s: rejecting %s: %s", addr_.toString().c_str(), from.c_str(), check.why);
        sendError(c.get(), Result::kInvalidUsage, check.why);
        return;
      case RegistrationCheck::Verdict::kAccept:
        break;
    }
    if (nranks_ == 0) {
      nranks_ = h.nranks;
      registered_.resize(nranks_);
      addresses_.resize(nranks_);
    }
    MIXCCL_INFO(log::kBootstrap, "bootstrap root %s: rank %u of %u registered from %s (listens on %s)",
                addr_.toString().c_str(), h.rank, h.nranks, from.c_str(), h.address.toString().c_str());
    addresses_[h.rank] = h.address;
    registered_[h.rank] = std::move(c);
    ++registeredCount_;
  }

  // Best effort and non-blocking: a reply this small fits in any socket buffer.
  void sendError(RootConn* c, Result status, const char* message) {
    std::string text(message, strnlen(message, kMaxReplyMessage));
    ReplyHeader h;
    h.status = static_cast<uint32_t>(status);
    h.payloadBytes = static_cast<uint32_t>(text.size());
    std::vector<uint8_t> buf(ReplyHeader::kBytes + text.size());
    h.encode(buf.data());
    memcpy(buf.data() + ReplyHeader::kBytes, text.data(), text.size());
    size_t done = 0;
    (void)writeAvailable(c->sock.fd(), buf.data(), buf.size(), &done);
  }

  void distribute() {
    ReplyHeader h;
    h.nranks = nranks_;
    h.payloadBytes = nranks_ * static_cast<uint32_t>(SocketAddress::kWireBytes);
    std::vector<uint8_t> buf(ReplyHeader::kBytes + h.payloadBytes);
    h.encode(buf.data());
    for (uint32_t r = 0; r < nranks_; ++r) {
      addresses_[r].encode(buf.data() + ReplyHeader::kBytes + r * SocketAddress::kWireBytes);
    }
    // To every rank at once: one by one, a rank that stopped reading (stopped, its host gone) would
    // hold up the table of every rank after it once the table outgrows the socket buffers. A rank
    // that takes nothing for MIXCCL_NET_TIMEOUT, or fails, is left out: that is its problem (it
    // times out or sees the reset); the others go on.
    std::vector<size_t> sent(nranks_, 0);
    std::vector<Clock::time_point> heard(nranks_, Clock::now());
    const auto silentLimit = std::chrono::seconds(std::max(1, netTimeoutSeconds()));
    std::vector<pollfd> pfds;
    for (;;) {
      pfds.clear();
      for (uint32_t r = 0; r < nranks_; ++r) {
        if (sent[r] == buf.size()) continue;
        const size_t before = sent[r];
        const int err = writeAvailable(registered_[r]->sock.fd(), buf.data(), buf.size(), &sent[r]);
        const auto now = Clock::now();
        if (sent[r] != before) heard[r] = now;
        const char* why = err != 0 ? strerror(err) : now - heard[r] > silentLimit ? "it took nothing" : nullptr;
        if (why != nullptr || now >= deadline_) {
          MIXCCL_WARN("bootstrap root %s: could not send the address table to rank %u at %s: %s",
                      addr_.toString().c_str(), r, registered_[r]->from.toString().c_str(),
                      why != nullptr ? why : "deadline");
          sent[r] = buf.size();  // given up
          continue;
        }
        if (sent[r] != buf.size()) pfds.push_back(pollfd{registered_[r]->sock.fd(), POLLOUT, 0});
      }
      if (pfds.empty()) break;
      (void)poll(pfds.data(), pfds.size(), 100);  // a slice: the silence limit is checked between
    }
    MIXCCL_INFO(log::kBootstrap, "bootstrap root %s: all %u ranks registered; table sent", addr_.toString().c_str(),
                nranks_);
  }

  void giveUp(double seconds) {
    std::string missing;
    int listed = 0;
    for (uint32_t r = 0; r < nranks_ && listed < 16; ++r) {
      if (!registered_[r]) {
        if (listed++ > 0) missing += ',';
        missing += std::to_string(r);
      }
    }
    if (nranks_ == 0) missing = "all (no rank registered)";
    char why[kMaxReplyMessage];
    if (acceptErrno_ != 0) {
      // Ranks that could not be accepted are not missing: blaming their unique id would mislead.
      snprintf(why, sizeof(why),
               "bootstrap root %s gave up after %.1f s with %u rank(s) registered: it %s (the root runs in the "
               "process that called ncclGetUniqueId, or in rank 0 with NCCL_COMM_ID)",
               addr_.toString().c_str(), seconds, registeredCount_, acceptCause().c_str());
    } else {
      snprintf(why, sizeof(why),
               "bootstrap root %s gave up after %.1f s: %u of %u ranks registered, missing ranks %s%s; check that "
               "every rank started and received the same unique id (MIXCCL_TIMEOUT sets the limit)",
               addr_.toString().c_str(), seconds, registeredCount_, nranks_, missing.c_str(),
               listed == 16 ? ",..." : "");
    }
    MIXCCL_WARN("%s", why);
    for (auto& c : registered_) {
      if (c) sendError(c.get(), Result::kRemoteError, why);
    }
    if (acceptErrno_ != 0) answerQueued(why);
  }

  // Ranks still in the listener's queue would otherwise see the connection reset when the root
  // exits, and take it for a refusal. Frees descriptors first (connections already answered, the
  // reserve), then answers each queued rank of this job; others are closed unanswered.
  void answerQueued(const char* why) {
    registered_.clear();
    pending_.clear();
    reserve_.release();
    const auto until = Clock::now() + kQueueAnswerBudget;
    int answered = 0;
    while (Clock::now() < until) {
      RootConn c;
      int err = 0;
      if (listener_.accept(&c.sock, &c.from, &err) != Result::kSuccess) break;  // queue empty, or still no fd
      // Read the hello first: closing a socket with unread data resets it, and the reply is lost.
      while (c.got < Hello::kBytes && Clock::now() < until) {
        pollfd p{c.sock.fd(), POLLIN, 0};
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
        if (poll(&p, 1, static_cast<int>(std::max<int64_t>(ms, 0))) < 0 && errno != EINTR) break;
        if (readAvailable(c.sock.fd(), c.hello, Hello::kBytes, &c.got) != 0) break;
      }
      if (c.got < Hello::kBytes) continue;
      bool addressOk = false;
      Hello h = Hello::decode(c.hello, &addressOk);
      if (h.magic != kHelloMagic || h.commHash != commHash_ || !sameSecret(h.secret, secret_)) continue;
      sendError(&c, Result::kRemoteError, why);
      ++answered;
    }
    MIXCCL_INFO(log::kBootstrap, "bootstrap root %s: told %d queued rank(s) why it gave up", addr_.toString().c_str(),
                answered);
  }

  Socket listener_;
  SocketAddress addr_;
  uint64_t commHash_;
  uint8_t secret_[16];
  Deadline deadline_;
  std::shared_ptr<CancelState> cancel_;  // shared with rootRegistry() while this root runs
  std::string left_;                     // why the job cannot complete: a registered rank left
  uint32_t nranks_ = 0;                  // 0 until the first valid registration fixes it
  uint32_t registeredCount_ = 0;
  std::vector<std::unique_ptr<RootConn>> pending_;
  std::vector<std::unique_ptr<RootConn>> registered_;
  std::vector<SocketAddress> addresses_;
  // Accept failures: the last errno (kept for the final message), the current pause of the
  // listener, and the rate limit of their warnings.
  int acceptErrno_ = 0;
  uint64_t acceptFailures_ = 0;
  std::chrono::milliseconds acceptBackoff_{0};
  Clock::time_point acceptPausedUntil_{};
  bool acceptWarned_ = false;
  Clock::time_point lastAcceptWarn_{};
  ReserveFd reserve_;
};

}  // namespace

Result startRoot(SocketAddress* addr, uint64_t commHash, const uint8_t secret[16]) {
  raiseFileLimit();  // the root holds a connection per rank while the job registers
  Socket listener;
  MIXCCL_TRY(Socket::listen(addr, &listener));
  try {
    auto root = std::make_unique<Root>(std::move(listener), *addr, commHash, secret);
    std::thread([root = std::move(root)]() {
      pthread_setname_np(pthread_self(), "mixccl-root");
      root->run();
    }).detach();
  } catch (const std::exception& e) {
    return fail(Result::kSystemError, "cannot start the bootstrap root thread for %s: %s", addr->toString().c_str(),
                e.what());
  }
  return Result::kSuccess;
}

}  // namespace bootstrap

using namespace bootstrap;

void cancelRoot(const UniqueIdData& id, const std::string& why) {
  RootRegistry& registry = rootRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.roots.find(id.commHash);
  if (it == registry.roots.end()) return;  // served its job, gave up, or runs elsewhere
  std::lock_guard<std::mutex> cancelLock(it->second->mutex);
  it->second->requested = true;
  it->second->why = why.substr(0, kMaxReplyMessage);
}

void UniqueIdData::encode(uint8_t out[kBytes]) const {
  WireWriter w(out, kBytes);
  w.u32(kIdMagic);
  w.u32(kProtocolVersion);
  w.u64(commHash);
  w.bytes(secret, 16, 16);
  uint8_t a[SocketAddress::kWireBytes];
  root.encode(a);
  w.bytes(a, sizeof(a), sizeof(a));
  w.u32(flags);
  // The scope of a link-local root (NCCL_COMM_ID=[fe80::1%eth0]:port), which the 20-byte address
  // leaves out: without it rank 0 cannot bind there and no rank can connect (EINVAL).
  w.u32(root.scopeId());
  // bytes 60..127 stay zero (reserved)
}

Result UniqueIdData::decode(const uint8_t in[kBytes], UniqueIdData* out) {
  WireReader r(in, kBytes);
  uint32_t magic = r.u32();
  uint32_t version = r.u32();
  if (magic != kIdMagic) {
    return fail(Result::kInvalidArgument,
                "the ncclUniqueId is not a mixccl id (magic 0x%08x, expected 0x%08x): pass every rank the id that "
                "ncclGetUniqueId returned on one rank, unmodified",
                magic, kIdMagic);
  }
  if (version != kProtocolVersion) {
    return fail(Result::kInvalidUsage,
                "the ncclUniqueId was made by a mixccl speaking bootstrap protocol %u; this build speaks %u: run "
                "compatible mixccl builds on all ranks",
                version, kProtocolVersion);
  }
  UniqueIdData d;
  d.commHash = r.u64();
  memcpy(d.secret, r.here(), 16);
  r.skip(16);
  MIXCCL_TRY(SocketAddress::decode(r.here(), &d.root));
  r.skip(SocketAddress::kWireBytes);
  d.flags = r.u32();
  d.root.setScopeId(r.u32());  // 0 (global scope) in ids of builds that did not write it
  *out = d;
  return Result::kSuccess;
}

Result createUniqueId(UniqueIdData* id, bool honourCommIdEnv) {
  *id = UniqueIdData{};
  const std::string& commId = config::getString(config::Knob::kCommId);
  if (honourCommIdEnv && !commId.empty()) {
    // Every process must derive the same id from its environment alone: without
    // MIXCCL_COMM_SECRET nothing here is secret, and such jobs are only as private as the
    // network (PROTOCOL.md). With it, both halves of the secret depend on the whole string.
    MIXCCL_TRY(parseHostPort(commId, &id->root));
    if (id->root.port() == 0) {
      return fail(Result::kInvalidArgument, "NCCL_COMM_ID=%s needs a fixed port other than 0", commId.c_str());
    }
    const std::string& shared = config::getString(config::Knob::kCommSecret);
    const std::string salted = "mixccl-secret:" + commId + (shared.empty() ? "" : ":" + shared);
    const std::string salted2 = "mixccl-secret-2:" + commId + (shared.empty() ? "" : ":" + shared);
    id->commHash = fnv1a64(commId.data(), commId.size());
    uint64_t s0 = fnv1a64(salted.data(), salted.size());
    uint64_t s1 = shared.empty() ? fnv1a64(&s0, sizeof(s0)) : fnv1a64(salted2.data(), salted2.size());
    memcpy(id->secret, &s0, 8);
    memcpy(id->secret + 8, &s1, 8);
    id->flags = UniqueIdData::kRootStartedByRank0;
    MIXCCL_INFO(log::kBootstrap, "unique id from NCCL_COMM_ID=%s (rank 0 will start the root)", commId.c_str());
    return Result::kSuccess;
  }
  uint8_t random[24];
  size_t got = 0;
  while (got < sizeof(random)) {
    ssize_t n = getrandom(random + got, sizeof(random) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Result::kSystemError, "getrandom failed: %s; cannot make a unique id", strerror(errno));
    got += static_cast<size_t>(n);
  }
  memcpy(&id->commHash, random, 8);
  memcpy(id->secret, random + 8, 16);
  MIXCCL_TRY(findListenAddress(&id->root, nullptr));
  MIXCCL_TRY(startRoot(&id->root, id->commHash, id->secret));
  return Result::kSuccess;
}

}  // namespace mixccl
