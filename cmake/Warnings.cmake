# One place for compiler warnings; CI builds with VOLTSERVE_WERROR=ON.
add_library(voltserve_warnings INTERFACE)
target_compile_options(voltserve_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wnon-virtual-dtor>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wshadow=local>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:-Wshadow-uncaptured-local>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${VOLTSERVE_WERROR}>>:-Werror>)
