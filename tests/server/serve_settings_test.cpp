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
  CHECK(s.kv_cache_dtype == "auto");
  REQUIRE(apply_config_file(write("vs_cfg_mem.json", R"({"kv_pages": 512, "lm_head": "nvfp4", "kv_cache_dtype": "fp8"})"),
                            s).is_ok());
  CHECK(s.kv_pages == 512);
  CHECK(s.lm_head == "nvfp4");
  CHECK(s.kv_cache_dtype == "fp8");
}

TEST_CASE("config file connection limits apply; zero or negative timeouts are refused", "[unit]") {
  ServeSettings s;
  auto p = write("vs_cfg_conn.json", R"({"header_timeout": 2.5, "body_timeout": 30, "keep_alive_timeout": 5,
                                         "write_timeout": 7, "max_connections": 100, "max_connections_per_address": 8})");
  REQUIRE(apply_config_file(p, s).is_ok());
  CHECK(s.http.header_timeout_s == 2.5);
  CHECK(s.http.body_timeout_s == 30);
  CHECK(s.http.keep_alive_timeout_s == 5);
  CHECK(s.http.write_timeout_s == 7);
  CHECK(s.http.max_connections == 100);
  CHECK(s.http.max_connections_per_address == 8);
  Status zero = apply_config_file(write("vs_cfg_conn0.json", R"({"header_timeout": 0})"), s);
  CHECK(zero.message().find("header_timeout") != std::string::npos);
  Status few = apply_config_file(write("vs_cfg_conn1.json", R"({"max_connections": 3})"), s);
  CHECK(few.message().find("max_connections") != std::string::npos);
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
  Status head = apply_config_file(write("vs_cfg_bad4.json", R"({"lm_head": "int4"})"), s);
  CHECK(head.message().find("lm_head") != std::string::npos);
  Status kv = apply_config_file(write("vs_cfg_bad6.json", R"({"kv_cache_dtype": "e5m2"})"), s);
  CHECK(kv.message().find("kv_cache_dtype") != std::string::npos);
  Status pages = apply_config_file(write("vs_cfg_bad5.json", R"({"kv_pages": -1})"), s);
  CHECK(pages.message().find("kv_pages") != std::string::npos);
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

TEST_CASE("the prefix cache settings come from the config file, range-checked", "[unit]") {
  ServeSettings s;
  CHECK(s.prefix_cache);  // on by default
  CHECK(s.prefix_cache_snapshots == kDefaultPrefixSnapshots);
  REQUIRE(apply_config_file(write("vs_cfg_prefix.json", R"({"prefix_cache_snapshots": 12, "prefix_snapshot_interval": 256})"), s).is_ok());
  CHECK(s.prefix_cache_snapshots == 12);
  CHECK(s.prefix_snapshot_interval == 256);
  const Status bad = apply_config_file(write("vs_cfg_prefix_bad.json", R"({"prefix_cache_snapshots": -1})"), s);
  CHECK_FALSE(bad.is_ok());
  CHECK(bad.message().find("prefix_cache_snapshots") != std::string::npos);
}

TEST_CASE("speculative_k and max_speculative_k come from the config file", "[unit]") {
  ServeSettings s;
  CHECK(s.speculative_k == -1);  // auto
  REQUIRE(apply_config_file(write("vs_cfg_spec.json", R"({"speculative_k": 3, "max_speculative_k": 5})"), s).is_ok());
  CHECK(s.speculative_k == 3);
  CHECK(s.max_speculative_k == 5);
  REQUIRE(apply_config_file(write("vs_cfg_spec_auto.json", R"({"speculative_k": "auto"})"), s).is_ok());
  CHECK(s.speculative_k == -1);
  for (const char* bad : {R"({"speculative_k": "fast"})", R"({"speculative_k": 32})", R"({"max_speculative_k": -1})"}) {
    Status st = apply_config_file(write("vs_cfg_spec_bad.json", bad), s);
    INFO(bad);
    CHECK(st.message().find("speculative_k") != std::string::npos);
  }
  int32_t k = 0;
  CHECK(parse_speculative_k("auto", k));
  CHECK(k == -1);
  CHECK(parse_speculative_k("15", k));
  CHECK(k == 15);
  CHECK_FALSE(parse_speculative_k("32", k));
  CHECK_FALSE(parse_speculative_k("2x", k));
  CHECK_FALSE(parse_speculative_k("", k));
}

TEST_CASE("prefix_cache: false in the config file turns the cache off; a non-bool is refused naming the key", "[unit]") {
  ServeSettings s;
  REQUIRE(apply_config_file(write("vs_cfg_prefix_off.json", R"({"prefix_cache": false})"), s).is_ok());
  CHECK_FALSE(s.prefix_cache);
  const Status bad = apply_config_file(write("vs_cfg_prefix_off_bad.json", R"({"prefix_cache": "no"})"), s);
  CHECK_FALSE(bad.is_ok());
  CHECK(bad.message().find("prefix_cache") != std::string::npos);
}
