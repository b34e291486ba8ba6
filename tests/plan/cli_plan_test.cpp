// `build/voltserve plan` end to end: the 27B configs on 32 GB and 24 GB (text and JSON, the exit status says whether
// it fits), --fit's table, and bad arguments that fail with a message naming them.
#include <catch2/catch_test_macros.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "support/cli_run.h"

namespace {

namespace fs = std::filesystem;

using voltserve::testing::RunResult;

RunResult run_plan(const std::string& args) { return voltserve::testing::run_voltserve("plan " + args); }

std::string config(const std::string& name) {
  return std::string(VOLTSERVE_SOURCE_DIR) + "/config/models/" + name + ".json";
}

}  // namespace

TEST_CASE("voltserve plan prints a 27B plan that fits a 32 GB V100", "[e2e]") {
  const RunResult r =
      run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --gpu-memory 32GB --context 32768 --max-running 4 "
               "--kernel-family sm70");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  for (const char* want : {"memory plan:", "weights NVFP4", "embedding fp16", "lm_head", "KV cache fp16",
                           "GDN state fp32", "prefix snapshots fp32", "8 rows x", "activations", "kernel scratch", "CUDA graphs (estimate)",
                           "safety margin", ": fits"}) {
    CHECK(r.out.find(want) != std::string::npos);
  }
}

TEST_CASE("voltserve plan --json adds up; a plan that does not fit exits 3 with advice", "[e2e]") {
  const RunResult r = run_plan("--config " + config("qwen3.8-27b-mixed") +
                               " --gpu-memory 24GB --context 131072 --max-running 8 --json");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK_FALSE(j["fits"].get<bool>());
  int64_t sum = 0;
  for (const auto& it : j["items"]) sum += it["bytes"].get<int64_t>();
  CHECK(sum == j["total_bytes"].get<int64_t>());
  CHECK(j["total_bytes"].get<int64_t>() > j["device_bytes"].get<int64_t>());
  CHECK(j["device_bytes"].get<int64_t>() == (int64_t{24} << 30) - (int64_t{512} << 20));
  REQUIRE(j["advice"].size() > 0);
  bool context = false;
  for (const auto& a : j["advice"]) context |= a.get<std::string>().find("--context") != std::string::npos;
  CHECK(context);
}

TEST_CASE("voltserve plan --free-memory plans on that free memory, nothing taken off", "[e2e]") {
  const RunResult r = run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --free-memory 34359738368 --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["device_bytes"].get<int64_t>() == int64_t{32} << 30);
  CHECK(j["device"].get<std::string>().find("--free-memory 34359738368") != std::string::npos);
}

TEST_CASE("voltserve plan --fit: sequences at once per context, fewer as the context grows", "[e2e]") {
  const RunResult r = run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --gpu-memory 32GB --fit --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["fit"].size() == 7);  // 4k .. 256k
  int32_t last = 1 << 30;
  for (const auto& row : j["fit"]) {
    const int32_t m = row["max_running"].get<int32_t>();
    CHECK(m <= last);
    last = m;
  }
  CHECK(j["fit"][0]["max_running"].get<int32_t>() > 8);  // 4k contexts: many sequences
  CHECK(j["fit"][3]["max_running"].get<int32_t>() >= 4);  // 32k: at least four
}

TEST_CASE("voltserve plan --kv-cache-dtype: auto follows the checkpoint, fp8 halves the bytes per token", "[e2e]") {
  auto plan_json = [](const std::string& args) {
    const RunResult r = run_plan(args + " --gpu-memory 32GB --context 32768 --json");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto f16 = plan_json("--config " + config("qwen3.5-27b-nvfp4"));
  const auto f8 = plan_json("--config " + config("qwen3.5-27b-nvfp4") + " --kv-cache-dtype fp8");
  const auto mixed = plan_json("--config " + config("qwen3.8-27b-mixed"));  // kv_cache_quant_algo FP8
  const auto mixed16 = plan_json("--config " + config("qwen3.8-27b-mixed") + " --kv-cache-dtype fp16");
  CHECK(f16["kv_cache_dtype"] == "fp16");
  CHECK(f8["kv_cache_dtype"] == "fp8");
  CHECK(mixed["kv_cache_dtype"] == "fp8");
  CHECK(mixed16["kv_cache_dtype"] == "fp16");
  CHECK(2 * f8["kv_bytes_per_token"].get<int64_t>() == f16["kv_bytes_per_token"].get<int64_t>());
  CHECK(f8["n_pages"].get<int64_t>() > f16["n_pages"].get<int64_t>());
  const RunResult bad = run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --gpu-memory 32GB --kv-cache-dtype int4");
  CHECK(bad.exit_code != 0);  // CLI11's own validation status (105), as for every IsMember-checked option
  CHECK(bad.err.find("--kv-cache-dtype") != std::string::npos);
}

TEST_CASE("voltserve plan refuses bad arguments with a message naming them", "[e2e]") {
  RunResult r = run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --gpu-memory 32XB");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("32XB") != std::string::npos);
  r = run_plan("--gpu-memory 32GB");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--model") != std::string::npos);
  r = run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --gpu-memory 32GB --free-memory 30GB");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--free-memory") != std::string::npos);
  r = run_plan("--config " + config("qwen3.5-27b-nvfp4") + " --gpu-memory 32GB --max-running 0");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--max-running") != std::string::npos);
  r = run_plan("--model /nonexistent/model --gpu-memory 32GB");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("/nonexistent/model") != std::string::npos);
}
