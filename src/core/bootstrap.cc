// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// The rank side of the bootstrap (the root lives in bootstrap_root.cc).
//
// Terms: an *outgoing* connection is one this rank opened to send to a peer (one per peer, opened
// on first use, kept); an *incoming* connection is one a peer opened to us, identified by its
// hello. Data only ever flows from the opener to the acceptor, so each direction of a pair has
// exactly one byte stream and messages between a pair arrive in the order they were sent.
//
// Invariant that keeps rings deadlock-free: whenever this rank waits (in recv, or in send because
// the peer's socket buffer is full), it keeps accepting and reading every incoming connection and
// parks complete frames in the stash, keyed by (peer, channel, tag). A sender therefore never
// waits for its receiver to call recv, however large the message, as long as the receiver waits
// in some bootstrap call or returns to one.
#include "src/core/bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "src/core/bootstrap_wire.h"

namespace mixccl {

using namespace bootstrap;

namespace {

constexpr int kPollSliceMs = 100;
constexpr auto kHelloTimeout = std::chrono::seconds(10);
// How long a peer's listener may refuse connections before the peer counts as gone (sendFrame):
// long enough for a momentary refusal (a SYN dropped and answered by a reset) to pass.
constexpr auto kPeerRefusedLimit = std::chrono::milliseconds(2000);
constexpr size_t kMaxUnidentified = 1024;
constexpr auto kRootReplyGrace = std::chrono::seconds(1);
// How long a receive waits before it asks the listener of a peer that never connected to this rank
// whether that peer is still there (askListener), and how long a peer found gone that way may
// still deliver what it sent before it left (on its own connection, another TCP stream).
constexpr auto kAskListenerAfter = std::chrono::seconds(1);
constexpr auto kLeftGrace = std::chrono::seconds(1);
// How long peerSilent() must hold before a stalled send fails (see sendFrame).
constexpr auto kSilentFor = std::chrono::seconds(1);
// The most time releaseRoot() spends on one spare root (a live one answers within milliseconds).
constexpr auto kReleaseRootLimit = std::chrono::seconds(5);

// The hello `rank` of `nranks` opens a connection with (PROTOCOL.md 4.2): kRegister to the root
// of `id`, carrying this rank's listen address; kPeer to another rank.
void encodeHello(const UniqueIdData& id, HelloKind kind, int rank, int nranks, const SocketAddress& listenAddr,
                 uint8_t out[Hello::kBytes]) {
  Hello h;
  h.commHash = id.commHash;
  memcpy(h.secret, id.secret, 16);
  h.kind = kind;
  h.rank = static_cast<uint32_t>(rank);
  h.nranks = static_cast<uint32_t>(nranks);
  h.address = listenAddr;
  h.encode(out);
}

bool aborted(const std::atomic<bool>* abortFlag) {
  return abortFlag != nullptr && abortFlag->load(std::memory_order_acquire);
}

int sliceMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, kPollSliceMs));
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct InConn {
  enum class State { kHello, kHeader, kPayload };
  Socket sock;
  SocketAddress from;
  Clock::time_point opened;
  int peer = -1;  // known once the hello checked out
  State state = State::kHello;
  uint8_t head[Hello::kBytes] = {};  // hello, then each frame header
  size_t got = 0;
  FrameHeader frame;
  std::vector<uint8_t> payload;
};

using StashKey = std::tuple<int, uint32_t, uint32_t>;  // (peer, channel, tag)

}  // namespace

struct Bootstrap::Impl {
  UniqueIdData id;
  int rank = 0;
  int nranks = 0;
  const std::atomic<bool>* abortFlag = nullptr;
  Socket listener;
  SocketAddress listenAddr;
  std::vector<SocketAddress> peers;
  std::vector<Socket> out;
  std::vector<std::unique_ptr<InConn>> in;
  std::map<StashKey, std::deque<std::vector<uint8_t>>> stash;
  // Why a peer's incoming connection ended ("" while open or never opened).
  std::vector<std::string> peerGone;
  // A peer without an incoming connection found gone by askListener(): since when, and how.
  std::vector<Clock::time_point> leftAt;
  std::vector<std::string> leftHow;
  uint32_t collSeq = 0;

  std::string peerName(int peer) const { return "rank " + std::to_string(peer) + " (" + peers[peer].toString() + ")"; }

  Result checkWait(Deadline deadline, Clock::time_point start, const char* what, int peer, uint32_t tag) {
    if (aborted(abortFlag)) {
      return fail(Result::kRemoteError, "rank %d: bootstrap aborted while %s %s (tag 0x%x)", rank, what,
                  peerName(peer).c_str(), tag);
    }
    if (Clock::now() >= deadline) {
      return fail(Result::kRemoteError,
                  "rank %d: timed out after %.1f s %s %s (tag 0x%x); that rank is stuck, dead or unreachable "
                  "(MIXCCL_TIMEOUT sets the limit)",
                  rank, secondsSince(start), what, peerName(peer).c_str(), tag);
    }
    return Result::kSuccess;
  }

  // Waits up to timeoutMs for activity, then accepts and reads whatever is there. With writeFd
  // >= 0 it also returns when that socket becomes writable.
  Result pump(int timeoutMs, int writeFd) {
    std::vector<pollfd> fds;
    fds.push_back({listener.fd(), POLLIN, 0});
    for (auto& c : in) fds.push_back({c->sock.fd(), POLLIN, 0});
    if (writeFd >= 0) fds.push_back({writeFd, POLLOUT, 0});
    if (poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      return fail(Result::kSystemError, "rank %d: poll on bootstrap sockets failed: %s", rank, strerror(errno));
    }
    std::vector<std::unique_ptr<InConn>> still;
    for (size_t k = 0; k < in.size(); ++k) {
      std::unique_ptr<InConn> c = std::move(in[k]);
      if (fds[1 + k].revents != 0 && !readConn(c.get())) continue;  // closed and forgotten
      if (c->peer < 0 && Clock::now() - c->opened > kHelloTimeout) {
        MIXCCL_WARN("rank %d: bootstrap connection from %s sent no hello within %lld s; closed", rank,
                    c->from.toString().c_str(), static_cast<long long>(kHelloTimeout.count()));
        continue;
      }
      still.push_back(std::move(c));
    }
    in = std::move(still);
    if (fds[0].revents != 0) return acceptAll();
    return Result::kSuccess;
  }

  // Out of descriptors (EMFILE) is an error, not a retry: the listener stays readable, so the
  // wait loop would otherwise spin on poll + accept until the deadline.
  Result acceptAll() {
    for (;;) {
      auto c = std::make_unique<InConn>();
      Result r = listener.accept(&c->sock, &c->from);
      if (r == Result::kInProgress) return Result::kSuccess;
      if (r != Result::kSuccess) {
        return fail(r, "rank %d: bootstrap cannot accept a connection: %s", rank, lastError().c_str());
      }
      c->opened = Clock::now();
      size_t unidentified = 0;
      for (auto& x : in) unidentified += x->peer < 0;
      if (unidentified >= kMaxUnidentified) makeRoom();
      in.push_back(std::move(c));
    }
  }

  // Frees one place among the unidentified connections, so that a flood never keeps a peer out
  // (refusing the newest would refuse a rank that connects while the flood goes on). A peer's
  // hello may sit unread while this thread was busy accepting, so the unidentified ones are read
  // first: one that turns out to be a peer, or closed, frees its place; otherwise the oldest that
  // delivered nothing is closed, and only when every one holds part of a hello, the oldest.
  void makeRoom() {
    std::unique_ptr<InConn>* partial = nullptr;  // the oldest with part of a hello
    for (size_t k = 0; k < in.size(); ++k) {
      InConn* c = in[k].get();
      if (c->peer >= 0) continue;
      const bool open = readConn(c);
      if (open && c->peer < 0 && c->got > 0) {
        if (partial == nullptr) partial = &in[k];
        continue;
      }
      if (open && c->peer < 0) {
        MIXCCL_WARN(
            "rank %d: more than %zu unidentified bootstrap connections; closing the oldest silent one (from %s)", rank,
            kMaxUnidentified, c->from.toString().c_str());
      }
      if (!open || c->peer < 0) in.erase(in.begin() + static_cast<std::ptrdiff_t>(k));
      return;
    }
    if (partial == nullptr) return;
    MIXCCL_WARN("rank %d: more than %zu unidentified bootstrap connections; closing the oldest (from %s)", rank,
                kMaxUnidentified, (*partial)->from.toString().c_str());
    in.erase(in.begin() + (partial - in.data()));
  }

  // Reads everything available; completes frames into the stash. False: the connection is done.
  bool readConn(InConn* c) {
    for (;;) {
      int err = 0;
      if (c->state == InConn::State::kPayload) {
        err = readAvailable(c->sock.fd(), c->payload.data(), c->payload.size(), &c->got);
        if (err == 0 && c->got == c->payload.size()) {
          stash[StashKey(c->peer, static_cast<uint32_t>(c->frame.channel), c->frame.tag)].push_back(
              std::move(c->payload));
          c->payload = {};
          c->state = InConn::State::kHeader;
          c->got = 0;
          continue;
        }
      } else {
        size_t want = c->state == InConn::State::kHello ? Hello::kBytes : FrameHeader::kBytes;
        err = readAvailable(c->sock.fd(), c->head, want, &c->got);
        if (err == 0 && c->got == want) {
          if (!(c->state == InConn::State::kHello ? acceptHello(c) : acceptHeader(c))) return false;
          continue;
        }
      }
      if (err == 0) return true;  // nothing more for now
      if (c->peer >= 0) {
        bool clean = err < 0 && c->state == InConn::State::kHeader && c->got == 0;
        std::string why =
            clean ? "closed the connection"
                  : (err < 0 ? "closed the connection mid-message" : std::string("reset: ") + strerror(err));
        if (err > 0 && isUnreachableError(err)) {
          why = "was unreachable for " + std::to_string(netTimeoutSeconds()) +
                " s (MIXCCL_NET_TIMEOUT: " + strerror(err) + ")";
        }
        MIXCCL_INFO(log::kBootstrap, "rank %d: bootstrap connection from %s ended: %s", rank, peerName(c->peer).c_str(),
                    why.c_str());
        peerGone[c->peer] = why;
      }
      return false;
    }
  }

  bool acceptHello(InConn* c) {
    bool addressOk = false;
    Hello h = Hello::decode(c->head, &addressOk);
    const char* problem = checkPeerHello(h, id.commHash, id.secret, rank, nranks);
    if (problem != nullptr) {
      MIXCCL_WARN("rank %d: bootstrap connection from %s %s; closed", rank, c->from.toString().c_str(), problem);
      return false;
    }
    c->peer = static_cast<int>(h.rank);
    peerGone[c->peer].clear();
    c->state = InConn::State::kHeader;
    c->got = 0;
    return true;
  }

  bool acceptHeader(InConn* c) {
    c->frame = FrameHeader::decode(c->head);
    if (!frameHeaderOk(c->frame)) {
      peerGone[c->peer] = "sent a corrupt frame header";
      MIXCCL_WARN("rank %d: %s %s (magic 0x%08x, length %llu); closed", rank, peerName(c->peer).c_str(),
                  peerGone[c->peer].c_str(), c->frame.magic, static_cast<unsigned long long>(c->frame.length));
      return false;
    }
    c->payload.resize(c->frame.length);  // bounded by kMaxFrameBytes just above
    c->state = InConn::State::kPayload;
    c->got = 0;
    return true;
  }

  // Opens the outgoing connection to `peer` and writes its hello. Our own listener is served
  // while we wait: the peer may itself be connecting to us, and behind a flood of other
  // connections its attempt would find our accept queue full (port_noise: three ranks each timed
  // out on the next one's full queue). A failure there (out of descriptors) shows up again where
  // this rank next waits to receive. Every rank listens before it registers with the root, so a
  // peer whose address this rank has and that refuses is gone: fail within seconds instead of at
  // MIXCCL_TIMEOUT.
  Result openOut(int peer, Deadline deadline, Clock::time_point start, uint32_t tag) {
    Result r = connectOut(peer, deadline);
    if (!ok(r)) {
      return fail(r, "rank %d: cannot open a bootstrap connection to %s: %s", rank, peerName(peer).c_str(),
                  lastFailure().c_str());
    }
    return sendHello(peer, deadline, start, tag);
  }

  Result connectOut(int peer, Deadline deadline) {
    return Socket::connect(
        peers[peer], deadline, abortFlag, &out[peer], [this] { (void)pump(0, -1); }, kPeerRefusedLimit);
  }

  Result sendHello(int peer, Deadline deadline, Clock::time_point start, uint32_t tag) {
    uint8_t hello[Hello::kBytes];
    encodeHello(id, HelloKind::kPeer, rank, nranks, listenAddr, hello);
    return writeAll(peer, hello, sizeof(hello), deadline, start, tag);
  }

  // Writes [p, p + n) on the outgoing connection to `peer`, serving our own incoming side while
  // the peer's buffer is full (it may be blocked sending to us just the same).
  Result writeAll(int peer, const void* p, size_t n, Deadline deadline, Clock::time_point start, uint32_t tag) {
    Clock::time_point silentSince{};
    size_t done = 0;
    while (done < n) {
      const size_t before = done;
      int err = writeAvailable(out[peer].fd(), p, n, &done);
      if (err != 0) {
        out[peer].close();
        if (isUnreachableError(err)) {
          return fail(Result::kRemoteError, "rank %d: bootstrap: %s while sending (tag 0x%x)", rank,
                      unreachableText(peerName(peer), err).c_str(), tag);
        }
        return fail(Result::kRemoteError, "rank %d: bootstrap connection to %s failed while sending (tag 0x%x): %s",
                    rank, peerName(peer).c_str(), tag, strerror(err));
      }
      if (done == n) break;
      // Keepalive does not probe while data is unacknowledged: ask the kernel whether the peer
      // still answers (socket.h). Once per wait slice, and only after a second of silence, so a
      // window probe's answer in flight is not taken for a dead link.
      if (done != before || !peerSilent(out[peer].fd())) {
        silentSince = Clock::time_point{};
      } else if (silentSince == Clock::time_point{}) {
        silentSince = Clock::now();
      } else if (Clock::now() - silentSince >= kSilentFor) {
        out[peer].close();
        return fail(Result::kRemoteError, "rank %d: bootstrap: %s while sending (tag 0x%x)", rank,
                    unreachableText(peerName(peer), ETIMEDOUT).c_str(), tag);
      }
      MIXCCL_TRY(checkWait(deadline, start, "sending to", peer, tag));
      MIXCCL_TRY(pump(sliceMs(deadline), out[peer].fd()));
    }
    return Result::kSuccess;
  }

  Result sendFrame(int peer, Channel channel, uint32_t tag, const void* data, size_t bytes) {
    if (peer < 0 || peer >= nranks) {
      return fail(Result::kInvalidArgument, "rank %d: bootstrap send to rank %d, but nranks is %d", rank, peer, nranks);
    }
    if (bytes > kMaxFrameBytes) {
      return fail(Result::kInvalidArgument, "rank %d: bootstrap message of %zu bytes exceeds the %llu-byte limit", rank,
                  bytes, static_cast<unsigned long long>(kMaxFrameBytes));
    }
    if (peer == rank) {
      const uint8_t* p = static_cast<const uint8_t*>(data);
      stash[StashKey(peer, static_cast<uint32_t>(channel), tag)].emplace_back(p, p + bytes);
      return Result::kSuccess;
    }
    const auto start = Clock::now();
    const Deadline deadline = defaultDeadline();
    if (!out[peer].valid()) MIXCCL_TRY(openOut(peer, deadline, start, tag));
    FrameHeader f;
    f.channel = channel;
    f.tag = tag;
    f.length = bytes;
    uint8_t header[FrameHeader::kBytes];
    f.encode(header);
    MIXCCL_TRY(writeAll(peer, header, sizeof(header), deadline, start, tag));
    MIXCCL_TRY(writeAll(peer, data, bytes, deadline, start, tag));
    return Result::kSuccess;
  }

  Result recvFrame(int peer, Channel channel, uint32_t tag, void* data, size_t bytes) {
    if (peer < 0 || peer >= nranks) {
      return fail(Result::kInvalidArgument, "rank %d: bootstrap recv from rank %d, but nranks is %d", rank, peer,
                  nranks);
    }
    const auto start = Clock::now();
    const Deadline deadline = defaultDeadline();
    const StashKey key(peer, static_cast<uint32_t>(channel), tag);
    for (;;) {
      auto it = stash.find(key);
      if (it != stash.end()) {
        std::vector<uint8_t> msg = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) stash.erase(it);
        if (msg.size() != bytes) {
          return fail(Result::kRemoteError,
                      "rank %d: bootstrap message from %s (tag 0x%x) has %zu bytes, expected %zu; the ranks disagree "
                      "about the call sequence or sizes",
                      rank, peerName(peer).c_str(), tag, msg.size(), bytes);
        }
        if (bytes != 0) memcpy(data, msg.data(), bytes);
        return Result::kSuccess;
      }
      if (!peerGone[peer].empty()) {
        bool stillOpen = false;
        for (auto& c : in) stillOpen |= c->peer == peer;
        if (!stillOpen) {
          const bool unreachable = peerGone[peer].rfind("was unreachable", 0) == 0;
          return fail(Result::kRemoteError,
                      "rank %d: %s %s before sending the message this rank waits for (tag 0x%x); %s", rank,
                      peerName(peer).c_str(), peerGone[peer].c_str(), tag,
                      unreachable ? "the link or that host failed" : "it probably exited or aborted");
        }
      }
      if (!hasIncoming(peer) && Clock::now() - start >= kAskListenerAfter) {
        MIXCCL_TRY(askListener(peer, deadline, start, tag));
        if (leftAt[peer] != Clock::time_point{} && Clock::now() - leftAt[peer] >= kLeftGrace) {
          return fail(Result::kRemoteError,
                      "rank %d: %s %s before sending the message this rank waits for (tag 0x%x); it probably exited "
                      "or aborted",
                      rank, peerName(peer).c_str(), leftHow[peer].c_str(), tag);
        }
      }
      MIXCCL_TRY(checkWait(deadline, start, "waiting for a message from", peer, tag));
      MIXCCL_TRY(pump(sliceMs(deadline), -1));
    }
  }

  bool hasIncoming(int peer) const {
    for (const auto& c : in) {
      if (c->peer == peer) return true;
    }
    return false;
  }

  // A peer that never opened a connection to this rank (init's ring connects each rank only to the
  // next) shows no closed connection when it leaves: a rank that failed a collective and aborted
  // left the others' finalize barrier waiting in the rounds that receive from it until
  // MIXCCL_TIMEOUT. So a long wait asks the peer's listener: this rank's outgoing connection to
  // it (opened here if it never sent to that peer; a live peer accepts it as it would a send) is
  // refused, or later found closed, once the peer's bootstrap is gone. The peer never writes on
  // that connection, so anything readable there is its end closing. Records leftAt/leftHow; the
  // caller gives what the peer sent before it left kLeftGrace to arrive on its own stream.
  Result askListener(int peer, Deadline deadline, Clock::time_point start, uint32_t tag) {
    if (leftAt[peer] != Clock::time_point{}) return Result::kSuccess;
    if (!out[peer].valid()) {
      Result r;
      {
        QuietFailures quiet;  // a refusal is this function's answer, not a failure to report
        r = connectOut(peer, deadline);
      }
      if (r == Result::kSuccess) return sendHello(peer, deadline, start, tag);
      if (aborted(abortFlag) || Clock::now() >= deadline) {
        return checkWait(deadline, start, "waiting for a message from", peer, tag);
      }
      leftHow[peer] = "is gone (" + lastQuietError() + ")";
      leftAt[peer] = Clock::now();
      return Result::kSuccess;
    }
    char byte = 0;
    const ssize_t n = ::recv(out[peer].fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return Result::kSuccess;
    leftHow[peer] = n == 0 ? "closed this rank's bootstrap connection"
                           : std::string("reset this rank's bootstrap connection (") + strerror(errno) + ")";
    leftAt[peer] = Clock::now();
    return Result::kSuccess;
  }
};

Result Bootstrap::init(const UniqueIdData& id, int rank, int nranks, const std::atomic<bool>* abortFlag,
                       std::unique_ptr<Bootstrap>* out) {
  out->reset();
  if (nranks < 1 || static_cast<uint32_t>(nranks) > kMaxRanks || rank < 0 || rank >= nranks) {
    return fail(Result::kInvalidArgument, "bootstrap: rank %d / nranks %d out of range (0 <= rank < nranks <= %u)",
                rank, nranks, kMaxRanks);
  }
  std::unique_ptr<Bootstrap> b;
  try {
    b.reset(new Bootstrap());
    b->impl_ = std::make_unique<Impl>();
  } catch (const std::exception& e) {
    return fail(Result::kSystemError, "bootstrap: out of memory: %s", e.what());
  }
  b->rank_ = rank;
  b->nranks_ = nranks;
  Impl& im = *b->impl_;
  im.id = id;
  im.rank = rank;
  im.nranks = nranks;
  im.abortFlag = abortFlag;
  const auto start = Clock::now();
  const Deadline deadline = defaultDeadline();

  MIXCCL_TRY(findListenAddress(&im.listenAddr, nullptr));
  MIXCCL_TRY(Socket::listen(&im.listenAddr, &im.listener));
  if ((id.flags & UniqueIdData::kRootStartedByRank0) != 0 && rank == 0) {
    SocketAddress rootAddr = id.root;
    MIXCCL_TRY(startRoot(&rootAddr, id.commHash, id.secret));
  }

  // Register with the root. It may start later than we do (NCCL_COMM_ID), so connect retries.
  // An id from ncclGetUniqueId names a root that listened before the id existed: refusals there
  // mean it is gone (it served its one communicator, gave up at its deadline, or its process
  // exited), which no wait until MIXCCL_TIMEOUT would change.
  const bool rootMayStartLater = (id.flags & UniqueIdData::kRootStartedByRank0) != 0;
  const std::string rootName = "the bootstrap root at " + id.root.toString();
  Socket root;
  Result r = Socket::connect(id.root, deadline, abortFlag, &root, {},
                             rootMayStartLater ? std::chrono::milliseconds(0) : kPeerRefusedLimit);
  if (!ok(r)) {
    // Socket::connect names a run of refusals that hit the limit "refused" (other failures do not).
    const bool rootGone = !rootMayStartLater && Clock::now() < deadline && !aborted(abortFlag) &&
                          lastError().find("refused") != std::string::npos;
    return fail(r, "rank %d of %d: cannot reach %s: %s; %s", rank, nranks, rootName.c_str(), lastError().c_str(),
                rootGone ? "its root is gone: it exits once every rank registered (a unique id serves one "
                           "communicator: call ncclGetUniqueId again for each new one), when it gives up on the job "
                           "(a rank failed or left before all registered, or MIXCCL_TIMEOUT passed: the other ranks' "
                           "errors say which), or with the process that called ncclGetUniqueId"
                         : "was the unique id made by a live process, and can this host reach that address "
                           "(NCCL_SOCKET_IFNAME)?");
  }
  uint8_t hello[Hello::kBytes];
  encodeHello(id, HelloKind::kRegister, rank, nranks, im.listenAddr, hello);
  MIXCCL_TRY(root.sendAll(hello, sizeof(hello), deadline, abortFlag, rootName.c_str()));
  // The root gives up at its own deadline, which usually falls before ours, and then says which
  // ranks are missing. Waiting a little past our deadline lets that explanation arrive.
  const Deadline replyDeadline = deadline + kRootReplyGrace;
  uint8_t head[ReplyHeader::kBytes];
  r = root.recvAll(head, sizeof(head), replyDeadline, abortFlag, rootName.c_str());
  if (!ok(r)) {
    // Closed before the deadline and not by our abort: the root refused our hello.
    bool refused = Clock::now() < replyDeadline && !aborted(abortFlag);
    return fail(r, "rank %d of %d: no address table from %s: %s%s", rank, nranks, rootName.c_str(), lastError().c_str(),
                refused ? "; the root drops ranks whose unique id differs from its own: pass every rank the same "
                          "ncclUniqueId"
                        : "");
  }
  ReplyHeader rep = ReplyHeader::decode(head);
  if (rep.magic != kReplyMagic) {
    return fail(Result::kRemoteError, "rank %d: %s answered with a corrupt reply (magic 0x%08x)", rank,
                rootName.c_str(), rep.magic);
  }
  if (rep.status != 0) {
    std::string msg(std::min(rep.payloadBytes, kMaxReplyMessage), '\0');
    if (!ok(root.recvAll(msg.data(), msg.size(), replyDeadline, abortFlag, rootName.c_str()))) {
      msg = "(no reason given)";
    }
    Result code =
        rep.status == static_cast<uint32_t>(Result::kInvalidUsage) ? Result::kInvalidUsage : Result::kRemoteError;
    // Invalid usage: this rank's registration was at fault. A remote error: the job cannot be
    // completed (the root timed out, a rank left, or the id's maker gave up), whoever is at fault.
    return fail(code, "rank %d of %d: %s %s: %s", rank, nranks, rootName.c_str(),
                code == Result::kInvalidUsage ? "refused the registration" : "gave up on the job", msg.c_str());
  }
  if (rep.nranks != static_cast<uint32_t>(nranks) || rep.payloadBytes != nranks * SocketAddress::kWireBytes) {
    return fail(Result::kRemoteError, "rank %d: %s sent a table for %u ranks (%u bytes); expected %d ranks", rank,
                rootName.c_str(), rep.nranks, rep.payloadBytes, nranks);
  }
  std::vector<uint8_t> table(rep.payloadBytes);
  MIXCCL_TRY(root.recvAll(table.data(), table.size(), replyDeadline, abortFlag, rootName.c_str()));
  root.close();
  im.peers.resize(nranks);
  for (int p = 0; p < nranks; ++p) {
    MIXCCL_TRY(SocketAddress::decode(table.data() + p * SocketAddress::kWireBytes, &im.peers[p]));
  }
  im.out.resize(nranks);
  im.peerGone.resize(nranks);
  im.leftAt.resize(nranks);
  im.leftHow.resize(nranks);
  MIXCCL_INFO(log::kBootstrap, "rank %d of %d: bootstrap up in %.3f s, listening on %s", rank, nranks,
              secondsSince(start), im.listenAddr.toString().c_str());
  *out = std::move(b);
  return Result::kSuccess;
}

Bootstrap::~Bootstrap() = default;

void Bootstrap::releaseRoot(const UniqueIdData& spare) {
  if ((spare.flags & UniqueIdData::kRootStartedByRank0) != 0 || spare.commHash == impl_->id.commHash) return;
  QuietFailures quiet;  // a root that gave up or whose process left is no error of this communicator
  const Deadline deadline = std::min(defaultDeadline(), Clock::now() + kReleaseRootLimit);
  const std::string rootName = "the unused bootstrap root at " + spare.root.toString();
  uint8_t hello[Hello::kBytes];
  encodeHello(spare, HelloKind::kRegister, 0, 1, impl_->listenAddr, hello);
  uint8_t head[ReplyHeader::kBytes];
  Socket root;
  Result r = Socket::connect(spare.root, deadline, impl_->abortFlag, &root, {}, kPeerRefusedLimit);
  if (ok(r)) r = root.sendAll(hello, sizeof(hello), deadline, impl_->abortFlag, rootName.c_str());
  if (ok(r)) r = root.recvAll(head, sizeof(head), deadline, impl_->abortFlag, rootName.c_str());
  if (ok(r)) {
    // The rest too (a one-entry table), so that closing with unread data resets nothing.
    std::vector<uint8_t> rest(std::min(ReplyHeader::decode(head).payloadBytes, kMaxReplyMessage));
    r = root.recvAll(rest.data(), rest.size(), deadline, impl_->abortFlag, rootName.c_str());
  }
  if (ok(r)) {
    MIXCCL_INFO(log::kBootstrap, "rank %d: stopped %s (an extra id of ncclCommInitRankScalable)", rank_,
                spare.root.toString().c_str());
  } else {
    MIXCCL_INFO(log::kBootstrap, "rank %d: could not stop %s: %s", rank_, rootName.c_str(), lastQuietError().c_str());
  }
}

const SocketAddress& Bootstrap::address(int rank) const { return impl_->peers[rank]; }

Result Bootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  return impl_->sendFrame(peer, Channel::kUser, tag, data, bytes);
}

Result Bootstrap::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  return impl_->recvFrame(peer, Channel::kUser, tag, data, bytes);
}

// Ring: in step s, pass on the block that arrived in step s-1 (first our own) to rank+1 and take
// the next one from rank-1; after nranks-1 steps every block has visited every rank.
Result Bootstrap::allGather(void* data, size_t bytes) {
  const int n = nranks_;
  if (n == 1) return Result::kSuccess;
  uint8_t* base = static_cast<uint8_t*>(data);
  const uint32_t tag = impl_->collSeq++;
  const int next = (rank_ + 1) % n;
  const int prev = (rank_ + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = (rank_ - s + n) % n;
    const int recvBlock = (rank_ - s - 1 + n) % n;
    MIXCCL_TRY(impl_->sendFrame(next, Channel::kAllGather, tag, base + sendBlock * bytes, bytes));
    MIXCCL_TRY(impl_->recvFrame(prev, Channel::kAllGather, tag, base + recvBlock * bytes, bytes));
  }
  return Result::kSuccess;
}

// Dissemination barrier: in round k, signal rank+2^k and wait for rank-2^k. After ceil(log2 n)
// rounds every rank has (transitively) heard from every other one.
Result Bootstrap::barrier() {
  const int n = nranks_;
  if (n == 1) return Result::kSuccess;
  const uint32_t seq = impl_->collSeq++;
  uint32_t round = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++round) {
    const uint32_t tag = (seq << 5) | round;
    uint8_t token = 0;
    MIXCCL_TRY(impl_->sendFrame((rank_ + dist) % n, Channel::kBarrier, tag, &token, 1));
    MIXCCL_TRY(impl_->recvFrame((rank_ - dist % n + n) % n, Channel::kBarrier, tag, &token, 1));
  }
  return Result::kSuccess;
}

}  // namespace mixccl
