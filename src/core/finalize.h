// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// ncclCommFinalize's work. Host operations complete before their call returns, but "complete
// here" is not "complete everywhere": a rank that destroys its communicator right after its last
// call may leave while a peer is still inside a collective with it. As NCCL's does, finalize
// returns only once every rank has finished the communicator's outstanding work: a barrier
// among all ranks over the bootstrap (O(log n) connections per rank), bounded by MIXCCL_TIMEOUT,
// the abort flag and peer death like every wait. Then, with every rank past its last operation,
// a collective message that is still unread on a lane into this rank was sent by an operation
// that this rank never matched (two ranks that disagreed on a root, for one): that is reported as
// the mismatch it is instead of passing silently.
//
// Blocking; called by the thread that owns the communicator (NCCL's rule), once.

#include "common/result.h"

namespace mixccl {

class Communicator;

Result finalizeCommunicator(Communicator& comm);

}  // namespace mixccl
