# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
"""Builds torch_mixccl._C, mixccl's torch.distributed backend, with torch.utils.cpp_extension.

CMake runs this (torch/CMakeLists.txt) with MIXCCL_INCLUDE_DIR (the folder of nccl.h) and
MIXCCL_LIBRARY_DIR (the folder of libmixccl.so). The extension links libmixccl.so and finds it at
run time through an RPATH relative to itself: the build tree (build/python/torch_mixccl -> build/)
and the installed tree (<libdir>/mixccl/python/torch_mixccl -> <libdir>) both work without
LD_LIBRARY_PATH. DT_RPATH rather than DT_RUNPATH, so a stray LD_LIBRARY_PATH entry holding
NVIDIA's libnccl.so.2 (the same SONAME) cannot replace mixccl under the extension.
"""
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
include_dir = os.environ.get("MIXCCL_INCLUDE_DIR", os.path.join(here, "..", "include"))
library_dir = os.environ.get("MIXCCL_LIBRARY_DIR", os.path.join(here, "..", "build"))

setup(
    name="torch_mixccl",
    version="0.3.0",
    packages=["torch_mixccl"],
    ext_modules=[
        CppExtension(
            "torch_mixccl._C",
            sorted(glob.glob(os.path.join(here, "csrc", "*.cc"))),
            include_dirs=[include_dir],
            library_dirs=[library_dir],
            libraries=["mixccl"],
            # torch 1.13 headers use std::iterator, deprecated in C++17: their warnings would bury ours.
            # -g1 (line tables, enough for a backtrace) overrides Python's -g: full debug info of torch's
            # and pybind11's templates took half of the extension's compile time.
            extra_compile_args=["-std=c++17", "-O2", "-g1", "-Wall", "-Wno-unused-parameter", "-Wno-deprecated-declarations"],
            extra_link_args=[
                "-Wl,--disable-new-dtags",
                "-Wl,-rpath,$ORIGIN/../..",  # build tree
                "-Wl,-rpath,$ORIGIN/../../..",  # installed tree
            ],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
