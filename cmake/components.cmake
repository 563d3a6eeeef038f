# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# Layers and components (DESIGN.md section 1, "Components").
#
# Layers. Each layer is one static library built from one folder; it links only the layers below:
#
#   common  <-  algorithms, device (src/device), transports  <-  core (src/core)  <-  api (src/api)
#
# Sources spell includes from the repository root ("common/log.h", "src/core/op.h"), but no target
# sees the repository root. A layer compiles against its own include root, a folder in the build
# tree holding symbolic links to the folders of that layer and of the layers below it, and nothing
# else (plus include/, the public headers). So `#include "src/core/communicator.h"` in transports/
# is "file not found", not a convention. tests/layering also checks every #include line against
# the same table (it catches what links cannot: headers of a layer that nothing compiles yet).
#
# Components. A transport or device backend is a folder whose CMakeLists.txt makes one call:
#
#   mixccl_component(TRANSPORT shm FACTORY makeShmTransport)
#   mixccl_component(BACKEND opencl FACTORY makeOpenclBackend LIBRARIES OpenCL::OpenCL)
#
# It builds the folder's *.cc into its own static target (mixccl_transport_<name> or
# mixccl_device_<name>), and records (name, factory). After every folder is read,
# mixccl_generate_registries() writes one table source per kind into the build tree and compiles it
# into the layer. The table names each factory, so the linker pulls every component in from its
# static archive: nothing depends on static initialisers, which archives silently drop when
# nothing refers to them. Core code only iterates the table (transports/registry.h,
# src/device/registry.h).
#
# A component that needs an optional dependency makes its call only when the dependency is found
# (`if(NOT OpenCL_FOUND) return() endif()` before the call): it is then absent from the table and
# from the link, and the rest of the build does not change.
#
# Factory signatures (declared by the generated table, so a wrong one fails to link):
#   TRANSPORT: std::unique_ptr<Transport> <factory>(const TransportContext& ctx)
#   BACKEND:   Result <factory>(std::unique_ptr<DeviceBackend>* out)

# Folders of each layer, and which layers each one may see (itself included).
set(MIXCCL_LAYER_FOLDER_common common)
set(MIXCCL_LAYER_FOLDER_algorithms algorithms)
set(MIXCCL_LAYER_FOLDER_device src/device)
set(MIXCCL_LAYER_FOLDER_transports transports)
set(MIXCCL_LAYER_FOLDER_core src/core)
set(MIXCCL_LAYER_FOLDER_api src/api)
set(MIXCCL_LAYER_BELOW_common "")
set(MIXCCL_LAYER_BELOW_algorithms common)
set(MIXCCL_LAYER_BELOW_device common)
set(MIXCCL_LAYER_BELOW_transports common)
set(MIXCCL_LAYER_BELOW_core algorithms device transports)
set(MIXCCL_LAYER_BELOW_api core)

# All layers a layer may see: itself and everything below it, transitively.
function(_mixccl_layer_closure layer out)
  set(seen ${layer})
  foreach(below ${MIXCCL_LAYER_BELOW_${layer}})
    _mixccl_layer_closure(${below} sub)
    list(APPEND seen ${sub})
  endforeach()
  list(REMOVE_DUPLICATES seen)
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# build/layers/<layer>/ with a link per visible folder (e.g. src/device -> <source>/src/device).
function(_mixccl_layer_root layer out)
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  _mixccl_layer_closure(${layer} visible)
  foreach(l ${visible})
    set(folder ${MIXCCL_LAYER_FOLDER_${l}})
    get_filename_component(parent ${root}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder} RESULT rc SYMBOLIC)
    if(NOT rc STREQUAL "0")
      message(FATAL_ERROR "mixccl: cannot link ${root}/${folder} -> ${PROJECT_SOURCE_DIR}/${folder} (${rc}); "
                          "the layer include roots need a file system with symbolic links")
    endif()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# Include directories for code of `layer`: its root and the public headers. PUBLIC, so a consumer
# (always a layer above) sees this layer's headers, never more than it may.
function(_mixccl_layer_includes target layer)
  _mixccl_layer_root(${layer} root)
  target_include_directories(${target} PUBLIC ${root} ${PROJECT_SOURCE_DIR}/include)
endfunction()

# mixccl_layer(<layer> [DEPS <libraries>...]) in the layer's folder: target mixccl_<layer> from the
# folder's *.cc. A subfolder with its own CMakeLists.txt is a component (added here); a subfolder
# without one is part of the layer.
function(mixccl_layer layer)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  if(NOT DEFINED MIXCCL_LAYER_FOLDER_${layer})
    message(FATAL_ERROR "mixccl_layer(${layer}): unknown layer; add it to the table in cmake/components.cmake")
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  file(GLOB subdirs LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*)
  set(components)
  foreach(d ${subdirs})
    if(NOT IS_DIRECTORY ${d})
      continue()
    elseif(EXISTS ${d}/CMakeLists.txt)
      list(APPEND components ${d})
    else()
      file(GLOB_RECURSE s CONFIGURE_DEPENDS ${d}/*.cc)
      list(APPEND srcs ${s})
    endif()
  endforeach()
  set(target mixccl_${layer})
  # empty.cc keeps a layer valid while it has no sources of its own (transports/ has only headers).
  add_library(${target} STATIC ${PROJECT_BINARY_DIR}/empty.cc ${srcs})
  _mixccl_layer_includes(${target} ${layer})
  foreach(below ${MIXCCL_LAYER_BELOW_${layer}})
    target_link_libraries(${target} PUBLIC mixccl_${below})
  endforeach()
  target_link_libraries(${target} PUBLIC ${L_DEPS})
  foreach(d ${components})
    add_subdirectory(${d})
  endforeach()
endfunction()

# mixccl_component(TRANSPORT|BACKEND <name> FACTORY <function> [SOURCES <files>...]
#                  [LIBRARIES <libraries>...] [TARGET <existing target>])
# <name> is the component's stable name: on the wire (peer info) for transports, in
# MIXCCL_DEVICE_BACKEND for backends. Lower case letters, digits and '_', at most 15 characters.
function(mixccl_component kind name)
  cmake_parse_arguments(C "" "FACTORY;TARGET" "SOURCES;LIBRARIES" ${ARGN})
  if(kind STREQUAL "TRANSPORT")
    set(layer transports)
    set(target mixccl_transport_${name})
  elseif(kind STREQUAL "BACKEND")
    set(layer device)
    set(target mixccl_device_${name})
  else()
    message(FATAL_ERROR "mixccl_component(${kind} ${name}): the kind must be TRANSPORT or BACKEND")
  endif()
  if(NOT name MATCHES "^[a-z0-9_]+$" OR name MATCHES "^.................")
    message(FATAL_ERROR "mixccl_component(${kind} ${name}): the name must be 1-15 of [a-z0-9_] (it goes on the wire)")
  endif()
  if(NOT C_FACTORY MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "mixccl_component(${kind} ${name}): FACTORY must name a function in namespace mixccl")
  endif()
  get_property(names GLOBAL PROPERTY MIXCCL_${kind}_NAMES)
  if(name IN_LIST names)
    message(FATAL_ERROR "mixccl_component(${kind} ${name}): registered twice (names must be unique)")
  endif()
  if(C_TARGET)
    set(target ${C_TARGET})
  else()
    if(NOT C_SOURCES)
      file(GLOB_RECURSE C_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
    endif()
    add_library(${target} STATIC ${C_SOURCES})
  endif()
  _mixccl_layer_includes(${target} ${layer})
  # A component sees its layer's headers and links the layers below it (never the layer target:
  # the layer links the component, through the generated table).
  foreach(below ${MIXCCL_LAYER_BELOW_${layer}})
    target_link_libraries(${target} PUBLIC mixccl_${below})
  endforeach()
  target_link_libraries(${target} PUBLIC ${C_LIBRARIES})
  set_property(GLOBAL APPEND PROPERTY MIXCCL_${kind}_NAMES ${name})
  set_property(GLOBAL APPEND PROPERTY MIXCCL_${kind}_FACTORIES ${C_FACTORY})
  set_property(GLOBAL APPEND PROPERTY MIXCCL_${kind}_TARGETS ${target})
  message(STATUS "mixccl: component ${kind} ${name} (${target})")
endfunction()

# Writes the tables (build/generated/registry/*.cc) and links every component into its layer.
# Called once, after every folder has been added.
function(mixccl_generate_registries)
  set(dir ${PROJECT_BINARY_DIR}/generated/registry)
  foreach(kind TRANSPORT BACKEND)
    get_property(names GLOBAL PROPERTY MIXCCL_${kind}_NAMES)
    get_property(factories GLOBAL PROPERTY MIXCCL_${kind}_FACTORIES)
    get_property(targets GLOBAL PROPERTY MIXCCL_${kind}_TARGETS)
    set(decls "")
    set(rows "")
    set(i 0)
    foreach(name ${names})
      list(GET factories ${i} factory)
      if(kind STREQUAL "TRANSPORT")
        string(APPEND decls "std::unique_ptr<Transport> ${factory}(const TransportContext& ctx);\n")
      else()
        string(APPEND decls "Result ${factory}(std::unique_ptr<DeviceBackend>* out);\n")
      endif()
      string(APPEND rows "    {\"${name}\", ${factory}},\n")
      math(EXPR i "${i} + 1")
    endforeach()
    if(kind STREQUAL "TRANSPORT")
      set(MIXCCL_REGISTRY_DECLS "${decls}")
      set(MIXCCL_REGISTRY_ROWS "${rows}")
      configure_file(${PROJECT_SOURCE_DIR}/cmake/transport_registry.cc.in ${dir}/transport_registry.cc @ONLY)
      target_sources(mixccl_transports PRIVATE ${dir}/transport_registry.cc)
      target_link_libraries(mixccl_transports PUBLIC ${targets})
    else()
      set(MIXCCL_REGISTRY_DECLS "${decls}")
      set(MIXCCL_REGISTRY_ROWS "${rows}")
      configure_file(${PROJECT_SOURCE_DIR}/cmake/backend_registry.cc.in ${dir}/backend_registry.cc @ONLY)
      target_sources(mixccl_device PRIVATE ${dir}/backend_registry.cc)
      target_link_libraries(mixccl_device PUBLIC ${targets})
    endif()
  endforeach()
endfunction()
