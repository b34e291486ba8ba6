# VOLTSERVE_SANITIZE=address,undefined | thread: the whole CPU build instrumented (scripts/sanitize.sh runs the
# suites; each sanitizer in its own build folder). Undefined behaviour aborts (-fno-sanitize-recover) so that a
# test sees it as a failure, not as a line in a log. -O1 keeps stacks exact and the CPU model fast enough.
set(VOLTSERVE_SANITIZE "" CACHE STRING "Sanitizers for the whole build: address,undefined or thread (CPU only)")
# An instrumented server is several times slower: the e2e suites multiply their latency limits and waits (and CTest
# their timeouts) by this factor, so that they check the same guarantees instead of failing on timing.
if(VOLTSERVE_SANITIZE MATCHES "thread")
  set(_scale 5)
elseif(VOLTSERVE_SANITIZE)
  set(_scale 3)
else()
  set(_scale 1)
endif()
set(VOLTSERVE_TEST_TIME_SCALE ${_scale} CACHE STRING "Factor on the e2e suites' latency limits, waits and timeouts")
if(NOT VOLTSERVE_TEST_TIME_SCALE MATCHES "^[1-9][0-9]?$")
  message(FATAL_ERROR "VOLTSERVE_TEST_TIME_SCALE must be a whole number from 1 to 99, not '${VOLTSERVE_TEST_TIME_SCALE}'")
endif()
if(VOLTSERVE_SANITIZE)
  if(VOLTSERVE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VOLTSERVE_SANITIZE needs -DVOLTSERVE_CUDA=OFF (device code is not instrumented)")
  endif()
  set(VOLTSERVE_CUDA OFF CACHE STRING "" FORCE)
  if(VOLTSERVE_SANITIZE MATCHES "thread" AND VOLTSERVE_SANITIZE MATCHES "address")
    message(FATAL_ERROR "VOLTSERVE_SANITIZE: thread and address cannot be combined (two builds)")
  endif()
  set(_san -fsanitize=${VOLTSERVE_SANITIZE})
  if(VOLTSERVE_SANITIZE MATCHES "undefined")
    list(APPEND _san -fno-sanitize-recover=all)
  endif()
  # -g1 (line tables only): a sanitizer report's stack still names file and line, at a fraction of full debug
  # information's compile and link time (the sanitizer builds are part of CI's default run).
  add_compile_options(${_san} -fno-omit-frame-pointer -g1 -O1)
  # GCC's flow analysis is confused by the instrumentation (GCC documents false -Wmaybe-uninitialized under
  # sanitizers; here inside libstdc++'s std::regex at -O1): the plain build keeps the warning as an error.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
  add_link_options(${_san})
  message(STATUS "sanitizers: ${VOLTSERVE_SANITIZE}")
endif()
