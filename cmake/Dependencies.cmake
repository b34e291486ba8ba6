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
