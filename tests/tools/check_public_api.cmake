# SPDX-License-Identifier: MIT
# Fails when C++ sources under DIRS (a ;-list; CTest passes tools/ and examples/) reach into the library's
# internals: a `detail::` name, or an include of a tensorfile/.../detail/ header. Those programs are what users
# copy from, so they must show what the public API can do. Run: cmake "-DDIRS=<dir>;<dir>" -P check_public_api.cmake
if(NOT DIRS)
  message(FATAL_ERROR "check_public_api: pass -DDIRS=<directories to scan>")
endif()
set(internal_use "detail::|#[ \t]*include[ \t]*[<\"]tensorfile/([^>\"]*/)?detail/")
set(found "")
set(scanned 0)
foreach(dir IN LISTS DIRS)
  file(GLOB_RECURSE sources "${dir}/*.c" "${dir}/*.cc" "${dir}/*.cpp" "${dir}/*.cxx" "${dir}/*.h" "${dir}/*.hpp"
       "${dir}/*.hxx" "${dir}/*.ipp" "${dir}/*.cu" "${dir}/*.cuh")
  foreach(source IN LISTS sources)
    math(EXPR scanned "${scanned} + 1")
    file(STRINGS "${source}" lines REGEX "${internal_use}")
    foreach(line IN LISTS lines)
      string(STRIP "${line}" line)
      string(APPEND found "  ${source}: ${line}\n")
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "check_public_api: these lines use the library's internals; use the public API instead:\n${found}")
endif()
message(STATUS "check_public_api: ${scanned} files use only the public API")
