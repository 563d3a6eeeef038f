# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Installs headers, the library (also as libnccl.so.2), a CMake package and mixccl.pc.
include(CMakePackageConfigHelpers)

install(TARGETS mixccl EXPORT mixcclTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The library file is libmixccl.so (SONAME libnccl.so.2); NCCL's names point at it. The prefix
# is read at install time so `cmake --install --prefix` works.
install(CODE "set(libdir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
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

configure_file(cmake/mixccl.pc.in ${PROJECT_BINARY_DIR}/mixccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mixccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
