// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Thread-local state on the call path, without a function call per access.
//
// In a shared library a thread_local is reached through __tls_get_addr (the general-dynamic
// model), and one with a constructor also through its init wrapper: a small collective made
// about 57 such calls, a fifth of its instructions (callgrind, one rank, 8 B all-reduce). The
// initial-exec model reads the variable at a fixed offset from the thread pointer instead. Its
// cost is room in the static TLS block, which a library loaded with dlopen (a Python extension
// that links libnccl.so.2) takes from glibc's small reserve (rtld.optional_static_tls, 512 bytes
// by default). So only small, trivially destructible variables use it (MIXCCL_TLS_FAST, about
// 100 bytes in all); larger per-thread state lives on the heap behind one such pointer per type
// (PerThread<T>). Everything else keeps the default model.

#include <memory>

#define MIXCCL_TLS_FAST __attribute__((tls_model("initial-exec")))

namespace mixccl {

// One T per thread, created on first use and destroyed when the thread exits. get() is a load
// and a test once created. T must be default-constructible; give each use its own type (a struct
// of the file's thread-local scratch), so two files never share one.
template <class T>
class PerThread {
 public:
  static T& get() {
    T* p = ptr_;
    return __builtin_expect(p != nullptr, 1) ? *p : create();
  }
  // This thread's T, or nullptr when it has none yet (never allocates).
  static T* peek() { return ptr_; }

 private:
  // The owner is touched once per thread (creation, exit): the default TLS model is fine there.
  struct Owner {
    std::unique_ptr<T> state;
    ~Owner() { ptr_ = nullptr; }
  };
  static T& create() {
    owner_.state = std::make_unique<T>();
    ptr_ = owner_.state.get();
    return *ptr_;
  }
  static inline thread_local T* ptr_ MIXCCL_TLS_FAST = nullptr;
  static inline thread_local Owner owner_;
};

}  // namespace mixccl
