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


def _create(store, rank, size, timeout):
    # torch 1.13 calls a backend's creator with (prefix store of the group, rank, size, timedelta).
    if not isinstance(timeout, timedelta):
        raise TypeError(f"mixccl: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    return ProcessGroupMixccl(store, rank, size, int(timeout.total_seconds() * 1000))


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create)
