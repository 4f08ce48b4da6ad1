# SPDX-License-Identifier: MIT
# Builds the four programs of tests/modes/CMakeLists.txt from TUs that include tensorfile/config.hpp (which holds
# the mode check) and checks which link. Arguments: CXX, INCLUDE, WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
file(WRITE "${WORK}/main.cpp" "#include <tensorfile/config.hpp>\nint other();\nint main() { return other(); }\n")
file(WRITE "${WORK}/other.cpp" "#include <tensorfile/config.hpp>\nint other() { return 0; }\n")
file(WRITE "${WORK}/library.cpp" "#define TENSORFILE_COMPILING_DEFINITIONS\n#include <tensorfile/config.hpp>\n")

function(compile name source)  # further arguments: defines
  execute_process(COMMAND "${CXX}" -std=c++20 ${ARGN} "-I${INCLUDE}" -c "${WORK}/${source}" -o "${WORK}/${name}.o"
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "compiling ${source} (${ARGN}) failed:\n${out}")
  endif()
endfunction()
compile(main_header_only main.cpp)
compile(other_header_only other.cpp)
compile(main_compiled main.cpp -DTENSORFILE_SEPARATE_COMPILATION)
compile(other_compiled other.cpp -DTENSORFILE_SEPARATE_COMPILATION)
compile(library library.cpp -DTENSORFILE_SEPARATE_COMPILATION)

set(symbol "link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none")
function(link label expect)  # further arguments: the objects
  set(objects "")
  foreach(object IN LISTS ARGN)
    list(APPEND objects "${WORK}/${object}.o")
  endforeach()
  execute_process(COMMAND "${CXX}" ${objects} -o "${WORK}/program" RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(expect STREQUAL "links" AND NOT status EQUAL 0)
    message(FATAL_ERROR "${label}: expected to link, got:\n${out}")
  elseif(expect STREQUAL "fails")
    if(status EQUAL 0)
      message(FATAL_ERROR "${label}: linked; expected a link error naming ${symbol}")
    endif()
    string(FIND "${out}" "${symbol}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${label}: the link failed without naming ${symbol}:\n${out}")
    endif()
  endif()
  message(STATUS "${label}: ${expect}, as expected")
endfunction()
link("header-only TUs" links main_header_only other_header_only)
link("compiled-mode TUs and the library" links main_compiled other_compiled library)
link("a header-only TU among compiled-mode ones" fails main_compiled other_header_only library)
link("a compiled-mode TU among header-only ones" fails main_header_only other_compiled library)
link("compiled-mode TUs without the library" fails main_compiled other_compiled)
