# SPDX-License-Identifier: MIT
# Strict warnings and optional sanitizers for tensorfile's own tests, examples and tools only. Warnings are
# errors only with TENSORFILE_WERROR=ON (CI turns it on), so a plain build on a newer compiler still succeeds.
add_library(tensorfile_strict INTERFACE)
target_compile_options(tensorfile_strict INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
  $<$<BOOL:${TENSORFILE_WERROR}>:-Werror>)
if(TENSORFILE_SANITIZE)
  target_compile_options(tensorfile_strict INTERFACE -fsanitize=${TENSORFILE_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  target_link_options(tensorfile_strict INTERFACE -fsanitize=${TENSORFILE_SANITIZE})
endif()
