# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""mixccl's torch.distributed backend.

    import torch_mixccl                      # registers the backend "mixccl"
    torch.distributed.init_process_group("mixccl")

Host (CPU) tensors only. Every operation returns at once with a Work object; a worker thread per
process group runs the operations in issue order. The process group's timeout bounds each
operation: when it expires the communicator is revoked and the operation raises, as does every
later one on that group. A dead peer makes the survivors' operations raise within seconds.
"""
from datetime import timedelta

import torch.distributed as dist

from ._C import ProcessGroupMixccl, nccl_version

__all__ = ["ProcessGroupMixccl", "BACKEND", "nccl_version"]

BACKEND = "mixccl"


def _create(opts, pg_options=None):
    # torch 1.13's extended creator API: opts carries the group's prefix store, rank, size, timeout
    # and its ranks in the default group ([] while the default group itself is being made).
    if pg_options is not None:
        raise ValueError(f"mixccl: process groups take no pg_options, got {type(pg_options).__name__}")
    if not isinstance(opts.timeout, timedelta):
        raise TypeError(f"mixccl: timeout must be a datetime.timedelta, got {type(opts.timeout).__name__}")
    timeout_ms = int(opts.timeout.total_seconds() * 1000)
    members = list(opts.global_ranks_in_group)
    world = dist.GroupMember.WORLD
    if members and isinstance(world, ProcessGroupMixccl):
        # A subgroup of a mixccl world: split or shrunk from the world's communicator.
        return ProcessGroupMixccl(world, members, timeout_ms)
    return ProcessGroupMixccl(opts.store, opts.group_rank, opts.group_size, timeout_ms)


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
