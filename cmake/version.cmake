# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# mixccl's own version for the log banner and --version: PROJECT_VERSION plus, when known, the git
# commit. The commit is read at configure time only, so building never needs git (a tarball has
# no commit and says nothing about one); -DMIXCCL_GIT_COMMIT=... sets it for packagers.
if(NOT DEFINED MIXCCL_GIT_COMMIT)
  set(MIXCCL_GIT_COMMIT "")
  find_package(Git QUIET)
  if(GIT_FOUND)
    # Only our own checkout counts: a source tree unpacked inside some other repository (a
    # packaging repository, say) must not report that repository's commit.
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --show-toplevel --absolute-git-dir --short=7 HEAD
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} RESULT_VARIABLE _git_rc OUTPUT_VARIABLE _git_out
                    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_git_rc EQUAL 0)
      string(REPLACE "\n" ";" _git_out "${_git_out}")
      list(LENGTH _git_out _git_n)
      if(_git_n EQUAL 3)
        list(GET _git_out 0 _git_top)
        list(GET _git_out 1 _git_dir)
        list(GET _git_out 2 _git_commit)
        file(REAL_PATH "${_git_top}" _git_top)
        file(REAL_PATH "${PROJECT_SOURCE_DIR}" _src)
        if(_git_top STREQUAL _src)
          set(MIXCCL_GIT_COMMIT ${_git_commit})
          # A commit or checkout moves HEAD's reflog: configure again then, so the hash is not stale.
          if(EXISTS "${_git_dir}/logs/HEAD")
            set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_git_dir}/logs/HEAD")
          endif()
        endif()
      endif()
    endif()
  endif()
endif()

if(MIXCCL_GIT_COMMIT)
  set(MIXCCL_VERSION_TEXT "${PROJECT_VERSION} (git ${MIXCCL_GIT_COMMIT})")
else()
  set(MIXCCL_VERSION_TEXT "${PROJECT_VERSION}")
endif()
message(STATUS "mixccl: version ${MIXCCL_VERSION_TEXT}, NCCL ${MIXCCL_NCCL_ABI_VERSION} ABI")
# Only common/version.cc and the tools' version flags include this header, so a new commit
# recompiles those few files, not the library.
configure_file(${PROJECT_SOURCE_DIR}/cmake/mixccl_version.h.in ${PROJECT_BINARY_DIR}/generated/mixccl_version.h @ONLY)
set(MIXCCL_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated)
