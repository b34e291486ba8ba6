# Unpacks the compressed test fixtures into the build tree at configure time (no network, no tools beyond CMake),
# so the tests read only the repository and its build tree. Sets VOLTSERVE_QWEN3_TOKENIZER_DIR.
#
# tests/fixtures/tokenizers/qwen3 keeps its 11 MB tokenizer.json as a .tar.xz (1.4 MB): what travels with the
# repository (to CI clones and the GPU machine) stays small. The SHA-256 guards against a stale or damaged copy.
set(_qwen3_src ${PROJECT_SOURCE_DIR}/tests/fixtures/tokenizers/qwen3)
set(VOLTSERVE_QWEN3_TOKENIZER_DIR ${PROJECT_BINARY_DIR}/fixtures/tokenizers/qwen3)
set(_qwen3_sha256 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4)

set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_qwen3_src}/tokenizer.json.tar.xz)
set(_have "")
if(EXISTS ${VOLTSERVE_QWEN3_TOKENIZER_DIR}/tokenizer.json)
  file(SHA256 ${VOLTSERVE_QWEN3_TOKENIZER_DIR}/tokenizer.json _have)
endif()
if(NOT _have STREQUAL _qwen3_sha256)
  file(ARCHIVE_EXTRACT INPUT ${_qwen3_src}/tokenizer.json.tar.xz DESTINATION ${VOLTSERVE_QWEN3_TOKENIZER_DIR}
       PATTERNS tokenizer.json)
  file(SHA256 ${VOLTSERVE_QWEN3_TOKENIZER_DIR}/tokenizer.json _have)
  if(NOT _have STREQUAL _qwen3_sha256)
    message(FATAL_ERROR "${_qwen3_src}/tokenizer.json.tar.xz unpacks to a tokenizer.json with SHA-256 ${_have}, "
                        "expected ${_qwen3_sha256} (see its README.md)")
  endif()
endif()
configure_file(${_qwen3_src}/tokenizer_config.json ${VOLTSERVE_QWEN3_TOKENIZER_DIR}/tokenizer_config.json COPYONLY)
