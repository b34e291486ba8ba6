# One place for compiler warnings; CI builds with VOLTSERVE_WERROR=ON.
add_library(voltserve_warnings INTERFACE)
target_compile_options(voltserve_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${VOLTSERVE_WERROR}>>:-Werror>)
