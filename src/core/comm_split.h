// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Communicators made from a parent: split by color/key, or shrink by excluding ranks. Both are
// blocking, collective over the ranks that take part, and use the parent's bootstrap to hand the
// child's unique id from the child's rank 0 (a fresh root) to its other members.

#include <memory>

#include "src/core/communicator.h"

namespace mixccl {

// All ranks of `parent` call it. Ranks with color < 0 (NCCL_SPLIT_NOCOLOR) take part in the
// exchange and get *out == nullptr. Child ranks are ordered by (key, parent rank).
Result splitCommunicator(Communicator* parent, int color, int key, const CommOptions& options,
                         std::unique_ptr<Communicator>* out);

// Every rank of `parent` not in `exclude` calls it (excluded ranks may be dead); child ranks keep
// the parent's order.
Result shrinkCommunicator(Communicator* parent, const int* exclude, int excludeCount, const CommOptions& options,
                          std::unique_ptr<Communicator>* out);

}  // namespace mixccl
