# Every dependency comes from Debian's packages (scripts/setup.sh installs them); nothing is
# downloaded at configure time and nothing is vendored.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
if(VOLTSERVE_TESTS)
  find_package(Catch2 3 REQUIRED)
  include(Catch)
endif()

# Header-only spdlog + fmt: binaries then need no libspdlog/libfmt at run time (the GPU
# machine has neither).
add_library(voltserve_logging INTERFACE)
get_target_property(_spdlog_inc spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(voltserve_logging SYSTEM INTERFACE ${_spdlog_inc})
target_compile_definitions(voltserve_logging INTERFACE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL)
target_link_libraries(voltserve_logging INTERFACE fmt::fmt-header-only Threads::Threads)

# XGrammar (structured output, engine/grammar/): not in Debian; scripts/setup.sh (scripts/xgrammar.sh) builds the
# pinned PyPI sdist's static C++ library into this prefix once. Found there only: nothing is fetched here.
set(VOLTSERVE_XGRAMMAR_PREFIX "$ENV{HOME}/.cache/voltserve/xgrammar-0.1.34" CACHE PATH
    "Where scripts/xgrammar.sh installed XGrammar 0.1.34")
if(DEFINED ENV{VOLTSERVE_XGRAMMAR_PREFIX})
  set(VOLTSERVE_XGRAMMAR_PREFIX "$ENV{VOLTSERVE_XGRAMMAR_PREFIX}" CACHE PATH "" FORCE)
endif()
find_library(XGRAMMAR_LIBRARY NAMES libxgrammar.a xgrammar PATHS "${VOLTSERVE_XGRAMMAR_PREFIX}/lib"
             "${VOLTSERVE_XGRAMMAR_PREFIX}/lib64" NO_DEFAULT_PATH)
find_path(XGRAMMAR_INCLUDE_DIR xgrammar/xgrammar.h PATHS "${VOLTSERVE_XGRAMMAR_PREFIX}/include" NO_DEFAULT_PATH)
if(NOT XGRAMMAR_LIBRARY OR NOT XGRAMMAR_INCLUDE_DIR)
  message(FATAL_ERROR "XGrammar not found in ${VOLTSERVE_XGRAMMAR_PREFIX}: run scripts/setup.sh (or "
                      "scripts/xgrammar.sh), or set VOLTSERVE_XGRAMMAR_PREFIX")
endif()
add_library(voltserve_xgrammar INTERFACE)
target_include_directories(voltserve_xgrammar SYSTEM INTERFACE "${XGRAMMAR_INCLUDE_DIR}")
target_link_libraries(voltserve_xgrammar INTERFACE "${XGRAMMAR_LIBRARY}" Threads::Threads)
target_compile_definitions(voltserve_xgrammar INTERFACE XGRAMMAR_ENABLE_CPPTRACE=0)
