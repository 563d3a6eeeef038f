// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The one source of mixccl_test_pch (tests/CMakeLists.txt), the target whose precompiled
// GoogleTest headers every internal suite reuses. It has nothing of its own to compile
// (gtest_main supplies main).
