// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "algorithms/sim.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>

namespace mixccl::algo {
namespace {

using Message = std::vector<SimCell>;

struct ActorState {
  size_t next = 0;       // index of the next step to run
  bool checked = false;  // steps[next] passed the shape and bounds checks
  uint64_t srcBase = 0;  // arena index of steps[next]'s src / dst (valid when checked)
  uint64_t dstBase = 0;
  std::vector<uint64_t> operandBases;  // arena index of each operand of a multi-source steps[next]
  std::vector<uint8_t> written;        // per arena cell: some step already wrote it
  uint64_t clock = 0;                  // when this rank is free again, in hops (SimStats::criticalHops)
};

const char* bufName(Buf b) {
  switch (b) {
    case Buf::kInput:
      return "Input";
    case Buf::kOutput:
      return "Output";
    case Buf::kScratch:
      return "Scratch";
    case Buf::kNone:
      break;
  }
  return "none";
}

class Simulator {
 public:
  Simulator(std::vector<SimActor>& actors, const SimOptions& o) : actors_(actors), opt_(o) {}

  Result run(SimStats* stats) {
    MIXCCL_TRY(setUp());
    SimStats st;
    for (;;) {
      bool advanced = false;
      bool allDone = true;
      for (size_t i = 0; i < actors_.size(); ++i) {
        if (state_[i].next >= actors_[i].schedule.steps.size()) continue;
        allDone = false;
        bool ran = false;
        MIXCCL_TRY(tryStep(i, &ran));
        if (ran) {
          advanced = true;
          ++st.steps;
        }
      }
      if (allDone) break;
      ++st.sweeps;
      if (!advanced)
        return fail(Result::kInvalidUsage, "schedule deadlock (FIFO depth %zu): %s", opt_.fifoDepth,
                    describeWaits().c_str());
    }
    for (size_t l = 0; l < fifos_.size(); ++l) {
      if (!fifos_[l].empty()) {
        return fail(Result::kInvalidUsage, "%zu message(s) from rank %zu to rank %zu were never received",
                    fifos_[l].size(), l / opt_.nranks, l % opt_.nranks);
      }
    }
    for (const SimActor& a : actors_) st.messages += a.messagesSent;
    for (const ActorState& as : state_) st.criticalHops = std::max(st.criticalHops, as.clock);
    if (stats != nullptr) *stats = st;
    return Result::kSuccess;
  }

 private:
  Result setUp() {
    if (opt_.nranks < 1 || opt_.fifoDepth < 1) {
      return fail(Result::kInvalidArgument, "simulate: nranks %d and fifoDepth %zu must both be >= 1", opt_.nranks,
                  opt_.fifoDepth);
    }
    fifos_.assign(static_cast<size_t>(opt_.nranks) * opt_.nranks, {});
    sentAt_.assign(fifos_.size(), {});
    state_.assign(actors_.size(), {});
    for (size_t i = 0; i < actors_.size(); ++i) {
      SimActor& a = actors_[i];
      if (a.rank < 0 || a.rank >= opt_.nranks) {
        return fail(Result::kInvalidArgument, "simulate: actor %zu has rank %d of %d", i, a.rank, opt_.nranks);
      }
      if (a.inputOffset + a.inputElems > a.arena.size() || a.outputOffset + a.outputElems > a.arena.size()) {
        return fail(Result::kInvalidArgument, "simulate: rank %d's Input/Output windows exceed its %zu-cell arena",
                    a.rank, a.arena.size());
      }
      // Scratch is appended to the arena, filled with garbage a correct schedule never reads
      // before writing (it would corrupt the result).
      a.scratchElems = a.schedule.scratchElems;
      a.scratchOffset = a.arena.size();
      a.arena.resize(a.arena.size() + a.scratchElems, SimCell{-999999937, -1000, 0});
      a.inputReductionReads.assign(a.inputElems, 0);
      a.elemsSent = 0;
      a.messagesSent = 0;
      state_[i].written.assign(a.arena.size(), 0);
    }
    return Result::kSuccess;
  }

  size_t linkIndex(int src, int dst) const { return static_cast<size_t>(src) * opt_.nranks + dst; }
  std::deque<Message>& link(int src, int dst) { return fifos_[linkIndex(src, dst)]; }

  // Arena index of element `off` of buffer `b`, after checking [off, off+count) is inside it.
  Result locate(const SimActor& a, size_t stepIdx, Buf b, uint64_t off, uint64_t count, uint64_t* base) {
    const uint64_t size = b == Buf::kInput ? a.inputElems : b == Buf::kOutput ? a.outputElems : a.scratchElems;
    if (off > size || count > size - off) {
      return fail(Result::kInvalidUsage, "rank %d step %zu: %s[%llu, +%llu) is outside its %llu elements", a.rank,
                  stepIdx, bufName(b), static_cast<unsigned long long>(off), static_cast<unsigned long long>(count),
                  static_cast<unsigned long long>(size));
    }
    *base = (b == Buf::kInput ? a.inputOffset : b == Buf::kOutput ? a.outputOffset : a.scratchOffset) + off;
    return Result::kSuccess;
  }

  Result checkShape(const SimActor& a, size_t idx, const Step& s) {
    auto badPeer = [&](int p) { return p < -1 || p >= opt_.nranks; };
    if (s.count == 0 && !isToken(s)) {
      return fail(Result::kInvalidUsage, "rank %d step %zu has count 0 and is not a token", a.rank, idx);
    }
    if (badPeer(s.recvPeer) || badPeer(s.sendPeer)) {
      return fail(Result::kInvalidUsage, "rank %d step %zu: peer (recv %d, send %d) outside [0, %d)", a.rank, idx,
                  s.recvPeer, s.sendPeer, opt_.nranks);
    }
    if (s.sourceCount > 0) {
      if (s.sourceCount < 2 || !opt_.reduction || s.recvPeer >= 0 || s.src != Buf::kNone) {
        return fail(Result::kInvalidUsage,
                    "rank %d step %zu: a multi-source step needs >= 2 operands, a reduction, no message in and no src "
                    "(it has %u operands, recv %d, src %s)",
                    a.rank, idx, s.sourceCount, s.recvPeer, bufName(s.src));
      }
      if (static_cast<uint64_t>(s.sourceFirst) + s.sourceCount > a.schedule.operands.size()) {
        return fail(Result::kInvalidUsage, "rank %d step %zu: operands [%u, +%u) outside the schedule's %zu", a.rank,
                    idx, s.sourceFirst, s.sourceCount, a.schedule.operands.size());
      }
    }
    const bool hasIn = s.recvPeer >= 0 || s.src != Buf::kNone || s.sourceCount > 0;
    const bool hasOut = s.sendPeer >= 0 || s.dst != Buf::kNone;
    if ((!hasIn || !hasOut) && !isToken(s)) {
      return fail(Result::kInvalidUsage, "rank %d step %zu has no %s", a.rank, idx, hasIn ? "destination" : "source");
    }
    if (!opt_.reduction && s.recvPeer >= 0 && s.src != Buf::kNone) {
      return fail(Result::kInvalidUsage,
                  "rank %d step %zu combines a message with %s in a collective without reduction", a.rank, idx,
                  bufName(s.src));
    }
    if (!opt_.reduction && s.finalize) {
      return fail(Result::kInvalidUsage, "rank %d step %zu sets finalize in a collective without reduction", a.rank,
                  idx);
    }
    return Result::kSuccess;
  }

  // The operands of a multi-source step: inside their buffers, never Input, apart from dst.
  Result locateOperands(const SimActor& a, size_t idx, const Step& s, ActorState* as) {
    as->operandBases.clear();
    for (uint32_t k = 0; k < s.sourceCount; ++k) {
      const Operand& o = a.schedule.operands[s.sourceFirst + k];
      if (o.buf == Buf::kInput || o.buf == Buf::kNone) {
        return fail(Result::kInvalidUsage, "rank %d step %zu: operand %u is %s (Output or Scratch only)", a.rank, idx,
                    k, bufName(o.buf));
      }
      uint64_t base = 0;
      MIXCCL_TRY(locate(a, idx, o.buf, o.offset, s.count, &base));
      if (s.dst != Buf::kNone && base < as->dstBase + s.count && as->dstBase < base + s.count) {
        return fail(Result::kInvalidUsage, "rank %d step %zu: operand %u overlaps %s, the accumulator", a.rank, idx, k,
                    bufName(s.dst));
      }
      as->operandBases.push_back(base);
    }
    return Result::kSuccess;
  }

  // Element i of a multi-source step's value: the left fold of its operands.
  SimCell fold(const SimActor& a, const ActorState& as, uint64_t i) const {
    SimCell v = a.arena[as.operandBases[0] + i];
    for (size_t k = 1; k < as.operandBases.size(); ++k) {
      const SimCell& c = a.arena[as.operandBases[k] + i];
      v.value = opt_.op == SimOp::kSum ? v.value + c.value : std::max(v.value, c.value);
      v.contributions += c.contributions;
      v.finalized += c.finalized;
    }
    return v;
  }

  Result tryStep(size_t ai, bool* ran) {
    SimActor& a = actors_[ai];
    ActorState& as = state_[ai];
    const size_t idx = as.next;
    const Step& s = a.schedule.steps[idx];
    if (!as.checked) {
      MIXCCL_TRY(checkShape(a, idx, s));
      if (s.src != Buf::kNone) MIXCCL_TRY(locate(a, idx, s.src, s.srcOffset, s.count, &as.srcBase));
      if (s.dst != Buf::kNone) MIXCCL_TRY(locate(a, idx, s.dst, s.dstOffset, s.count, &as.dstBase));
      if (s.src != Buf::kNone && s.dst != Buf::kNone && as.srcBase != as.dstBase && as.srcBase < as.dstBase + s.count &&
          as.dstBase < as.srcBase + s.count) {
        return fail(Result::kInvalidUsage, "rank %d step %zu: %s and %s overlap partially", a.rank, idx, bufName(s.src),
                    bufName(s.dst));
      }
      MIXCCL_TRY(locateOperands(a, idx, s, &as));
      as.checked = true;
    }
    const uint64_t srcBase = as.srcBase, dstBase = as.dstBase;
    // Resources first; nothing is consumed unless the whole step can run.
    std::deque<Message>* in = nullptr;
    if (s.recvPeer >= 0) {
      in = &link(s.recvPeer, a.rank);
      if (in->empty()) return Result::kSuccess;
      if (in->front().size() != s.count) {
        return fail(Result::kInvalidUsage, "rank %d step %zu expects %llu elements from rank %d, message has %zu",
                    a.rank, idx, static_cast<unsigned long long>(s.count), s.recvPeer, in->front().size());
      }
    }
    std::deque<Message>* out = nullptr;
    if (s.sendPeer >= 0) {
      out = &link(a.rank, s.sendPeer);
      if (out->size() >= opt_.fifoDepth) return Result::kSuccess;
    }

    // The step starts after this rank's previous one and once its message arrived (one hop after
    // the step that sent it started); a step that sends keeps its rank busy for that hop.
    uint64_t clock = as.clock;
    if (in != nullptr) clock = std::max(clock, sentAt_[linkIndex(s.recvPeer, a.rank)].front() + 1);
    Message value = takeBuffer(s.count);
    for (uint64_t i = 0; i < s.count; ++i) {
      SimCell v;
      bool have = false;
      if (s.sourceCount > 0) {
        v = fold(a, as, i);
        have = true;
      } else if (s.src != Buf::kNone) {
        const uint64_t cell = srcBase + i;
        v = a.arena[cell];
        if (s.src == Buf::kInput) {
          if (as.written[cell]) {
            return fail(Result::kInvalidUsage,
                        "rank %d step %zu reads Input[%llu] after an earlier step wrote that memory (in-place hazard)",
                        a.rank, idx, static_cast<unsigned long long>(s.srcOffset + i));
          }
          if (opt_.reduction) {
            ++v.contributions;  // where the engine applies pre()
            ++a.inputReductionReads[s.srcOffset + i];
          }
        }
        have = true;
      }
      if (in != nullptr) {
        const SimCell& r = in->front()[i];
        if (have) {
          v.value = opt_.op == SimOp::kSum ? v.value + r.value : std::max(v.value, r.value);
          v.contributions += r.contributions;
          v.finalized += r.finalized;
        } else {
          v = r;
        }
      }
      if (s.finalize) ++v.finalized;
      value[i] = v;
    }
    if (s.dst != Buf::kNone) {
      for (uint64_t i = 0; i < s.count; ++i) {
        a.arena[dstBase + i] = value[i];
        as.written[dstBase + i] = 1;
      }
    }
    if (in != nullptr) {
      spare_.push_back(std::move(in->front()));
      in->pop_front();
      sentAt_[linkIndex(s.recvPeer, a.rank)].pop_front();
    }
    as.clock = clock + (out != nullptr ? 1 : 0);
    if (out != nullptr) {
      out->push_back(std::move(value));
      sentAt_[linkIndex(a.rank, s.sendPeer)].push_back(clock);
      a.elemsSent += s.count;
      ++a.messagesSent;
    } else {
      spare_.push_back(std::move(value));
    }
    ++as.next;
    as.checked = false;
    *ran = true;
    return Result::kSuccess;
  }

  // Message buffers are recycled: schedules with tiny chunks run millions of steps.
  Message takeBuffer(uint64_t count) {
    if (spare_.empty()) return Message(count);
    Message m = std::move(spare_.back());
    spare_.pop_back();
    m.resize(count);
    return m;
  }

  std::string describeWaits() {
    std::string d;
    for (size_t i = 0; i < actors_.size(); ++i) {
      const SimActor& a = actors_[i];
      const size_t idx = state_[i].next;
      if (idx >= a.schedule.steps.size()) continue;
      const Step& s = a.schedule.steps[idx];
      char line[160];
      if (s.recvPeer >= 0 && link(s.recvPeer, a.rank).empty()) {
        snprintf(line, sizeof(line), "rank %d step %zu/%zu waits for a message from rank %d; ", a.rank, idx + 1,
                 a.schedule.steps.size(), s.recvPeer);
      } else {
        snprintf(line, sizeof(line), "rank %d step %zu/%zu waits for a free slot to rank %d; ", a.rank, idx + 1,
                 a.schedule.steps.size(), s.sendPeer);
      }
      if (d.size() + strlen(line) > 800) {
        d += "...";
        break;
      }
      d += line;
    }
    return d;
  }

  std::vector<SimActor>& actors_;
  const SimOptions opt_;
  std::vector<std::deque<Message>> fifos_;
  std::vector<std::deque<uint64_t>> sentAt_;  // per link, parallel to fifos_: the sender's clock
  std::vector<ActorState> state_;
  std::vector<Message> spare_;
};

}  // namespace

Result simulate(std::vector<SimActor>& actors, const SimOptions& options, SimStats* stats) {
  Simulator sim(actors, options);
  return sim.run(stats);
}

}  // namespace mixccl::algo
