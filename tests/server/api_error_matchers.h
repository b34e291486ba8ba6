// Test helper: run a validation call and check the ApiError it throws (status, param).
#pragma once

#include <catch2/catch_test_macros.hpp>

#include "openai/api_error.h"

#define CHECK_API_ERROR(expr, expected_status, expected_param)                                  \
  do {                                                                                          \
    bool vs_thrown_ = false;                                                                    \
    try {                                                                                       \
      (void)(expr);                                                                             \
    } catch (const voltserve::openai::ApiError& e) {                                            \
      vs_thrown_ = true;                                                                        \
      CHECK(e.http_status() == (expected_status));                                              \
      CHECK(e.param() == std::string(expected_param));                                          \
      CHECK(std::string(e.what()).size() > 5);                                                  \
    }                                                                                           \
    CHECK(vs_thrown_);                                                                          \
  } while (0)
