// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The C header check (abi_header_check.c) compiled as C++.
#include "abi_header_check.c"
