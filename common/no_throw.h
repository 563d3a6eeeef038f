// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Where an exception becomes a Result (DESIGN.md section 3): our code does not throw, but the
// standard library it uses may (std::bad_alloc from a container, std::system_error from
// std::thread). Used at each edge an exception must not cross: every API entry point (an
// exception through extern "C" is undefined), and the body of every thread the library starts
// (one leaving a thread's function calls std::terminate, killing the user's process).

#include <exception>
#include <new>
#include <system_error>

#include "common/result.h"

namespace mixccl {

// Runs body() (which returns a Result); an exception it throws is recorded with fail() as `what`
// and mapped: out of memory and system errors to kSystemError, anything else to kInternalError.
template <class Body>
Result noThrow(const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(Result::kSystemError, "%s: out of host memory", what);
  } catch (const std::system_error& e) {
    return fail(Result::kSystemError, "%s: system error: %s", what, e.what());
  } catch (const std::exception& e) {
    return fail(Result::kInternalError, "%s: unexpected exception: %s", what, e.what());
  } catch (...) {
    return fail(Result::kInternalError, "%s: unexpected exception", what);
  }
}

}  // namespace mixccl
