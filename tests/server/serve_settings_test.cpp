// Config files: keys apply, unknown keys and wrong types are errors naming the key.
#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <fstream>

#include "http/serve_settings.h"

using namespace voltserve;
using namespace voltserve::http;

namespace {

std::filesystem::path write(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST_CASE("config file keys apply", "[unit]") {
  ServeSettings s;
  auto p = write("vs_cfg_ok.json", R"({"port": 9000, "max_running": 3, "api_keys": "k", "cors_origins": ["a", "b"],
                                       "request_timeout": 1.5, "served_model_name": "m", "mirror_reasoning": false})");
  REQUIRE(apply_config_file(p, s).is_ok());
  CHECK(s.http.port == 9000);
  CHECK(s.max_running == 3);
  CHECK(s.http.api_keys == std::vector<std::string>{"k"});
  CHECK(s.http.cors_origins.size() == 2);
  CHECK(s.http.request_timeout_s == 1.5);
  CHECK(s.http.served_model_name == "m");
  CHECK_FALSE(s.http.mirror_reasoning);
}

TEST_CASE("the response store bounds come from the config file", "[unit]") {
  ServeSettings s;
  CHECK(s.http.response_store_entries == 1024);
  REQUIRE(apply_config_file(write("vs_cfg_store.json", R"({"response_store_entries": 7, "response_store_mib": 3})"), s).is_ok());
  CHECK(s.http.response_store_entries == 7);
  CHECK(s.http.response_store_bytes == size_t{3} << 20);
  Status bad = apply_config_file(write("vs_cfg_store_bad.json", R"({"response_store_mib": -1})"), s);
  CHECK(bad.message().find("response_store_mib") != std::string::npos);
}

TEST_CASE("config file errors name the key", "[unit]") {
  ServeSettings s;
  Status unknown = apply_config_file(write("vs_cfg_bad1.json", R"({"prot": 1})"), s);
  CHECK(unknown.message().find("prot") != std::string::npos);
  Status type = apply_config_file(write("vs_cfg_bad2.json", R"({"max_running": "many"})"), s);
  CHECK(type.message().find("max_running") != std::string::npos);
  CHECK_FALSE(apply_config_file(write("vs_cfg_bad3.json", "[1]"), s).is_ok());
  CHECK_FALSE(apply_config_file("/nonexistent/x.json", s).is_ok());
}

TEST_CASE("presets in config/ are valid", "[unit]") {
  for (const char* name : {"serve-local.json", "serve-throughput.json"}) {
    ServeSettings s;
    Status st = apply_config_file(std::filesystem::path(VOLTSERVE_SOURCE_DIR) / "config" / name, s);
    INFO(name << ": " << st.message());
    CHECK(st.is_ok());
  }
}

TEST_CASE("the default model is the bundled fixture", "[unit]") {
  CHECK(std::filesystem::exists(default_model_dir() / "config.json"));
}
