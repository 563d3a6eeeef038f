# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Installs headers, the library (also as libnccl.so.2), a CMake package, mixccl.pc and the license.
include(CMakePackageConfigHelpers)

install(TARGETS mixccl EXPORT mixcclTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The library file is libmixccl.so (SONAME libnccl.so.2); NCCL's names point at it. The prefix
# is read at install time so `cmake --install --prefix` works; an absolute libdir ignores it.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_libdir_at_install "${CMAKE_INSTALL_LIBDIR}")
else()
  set(_libdir_at_install "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}")
endif()
install(CODE "set(libdir \"\$ENV{DESTDIR}${_libdir_at_install}\")
              execute_process(COMMAND \"${CMAKE_COMMAND}\" -E create_symlink libmixccl.so \"\${libdir}/libnccl.so.2\")
              execute_process(COMMAND \"${CMAKE_COMMAND}\" -E create_symlink libnccl.so.2 \"\${libdir}/libnccl.so\")")
install(FILES include/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/mixccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL)

install(EXPORT mixcclTargets NAMESPACE mixccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mixccl)
configure_package_config_file(cmake/mixcclConfig.cmake.in ${PROJECT_BINARY_DIR}/mixcclConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mixccl)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mixcclConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mixcclConfig.cmake ${PROJECT_BINARY_DIR}/mixcclConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mixccl)

# mixccl.pc finds the prefix from its own place (${pcfiledir}), so the tree stays relocatable and
# `cmake --install --prefix` needs no reconfigure. The way up is computed, not assumed: with
# Debian's multiarch libdir (lib/x86_64-linux-gnu) the file sits three levels below the prefix,
# not two. An absolute libdir or includedir is outside any prefix and is written as it is.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(MIXCCL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(MIXCCL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  # The relative path from <prefix>/<libdir>/pkgconfig back up to <prefix>, e.g. "../../..".
  file(RELATIVE_PATH _pc_up "/mixccl-prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/mixccl-prefix")
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(MIXCCL_PC_PREFIX "\${pcfiledir}/${_pc_up}")
  set(MIXCCL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(MIXCCL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(MIXCCL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/mixccl.pc.in ${PROJECT_BINARY_DIR}/mixccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mixccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Apache-2.0 asks that every copy carry the license text.
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
