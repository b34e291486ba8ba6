// See serve_settings.h.
#include "http/serve_settings.h"

#include <charconv>

#include <fstream>
#include <sstream>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#ifndef VOLTSERVE_DEFAULT_MODEL_DIR
#define VOLTSERVE_DEFAULT_MODEL_DIR ""
#endif

namespace voltserve::http {

namespace {

using Json = nlohmann::ordered_json;

Status type_error(const std::filesystem::path& file, const std::string& key, const char* want) {
  return invalid_argument(fmt::format("{}: '{}' must be {}", file.string(), key, want));
}

}  // namespace

bool parse_speculative_k(const std::string& text, int32_t& out) {
  if (text == "auto") {
    out = -1;
    return true;
  }
  int32_t v = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0 || v > 31) return false;
  out = v;
  return true;
}

Status apply_config_file(const std::filesystem::path& file, ServeSettings& s) {
  std::ifstream in(file);
  if (!in) return not_found(fmt::format("cannot open config file {}", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument(fmt::format("{}: not a JSON object", file.string()));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    auto str = [&](std::string& dst) -> Status {
      if (!v.is_string()) return type_error(file, k, "a string");
      dst = v.get<std::string>();
      return Status::ok();
    };
    auto int32 = [&](int32_t& dst, int64_t lo, int64_t hi) -> Status {
      if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
        return type_error(file, k, fmt::format("an integer in [{}, {}]", lo, hi).c_str());
      }
      dst = static_cast<int32_t>(v.get<int64_t>());
      return Status::ok();
    };
    auto boolean = [&](bool& dst) -> Status {
      if (!v.is_boolean()) return type_error(file, k, "true or false");
      dst = v.get<bool>();
      return Status::ok();
    };
    auto number = [&](double& dst) -> Status {
      if (!v.is_number() || v.get<double>() < 0) return type_error(file, k, "a non-negative number");
      dst = v.get<double>();
      return Status::ok();
    };
    auto positive = [&](double& dst) -> Status {
      if (!v.is_number() || v.get<double>() <= 0) return type_error(file, k, "a positive number of seconds");
      dst = v.get<double>();
      return Status::ok();
    };
    auto strings = [&](std::vector<std::string>& dst) -> Status {
      if (v.is_string()) {
        dst = {v.get<std::string>()};
        return Status::ok();
      }
      if (!v.is_array()) return type_error(file, k, "a string or an array of strings");
      dst.clear();
      for (const Json& x : v) {
        if (!x.is_string()) return type_error(file, k, "a string or an array of strings");
        dst.push_back(x.get<std::string>());
      }
      return Status::ok();
    };
    Status st;
    int32_t port = s.http.port;
    int32_t http_threads = s.http.http_threads;
    if (k == "$comment" || k == "description") continue;
    if (k == "model") st = str(s.model);
    else if (k == "tokenizer") st = str(s.tokenizer);
    else if (k == "backend") st = str(s.backend);
    else if (k == "kernel_family") st = str(s.kernel_family);
    else if (k == "log_level") st = str(s.log_level);
    else if (k == "threads") st = int32(s.threads, 0, 1024);
    else if (k == "max_running") st = int32(s.max_running, 1, 4096);
    else if (k == "max_waiting") st = int32(s.max_waiting, 0, 1 << 20);
    else if (k == "context") st = int32(s.context, 0, 1 << 24);
    else if (k == "kv_pages") st = int32(s.kv_pages, 0, 1 << 26);
    else if (k == "lm_head") {
      st = str(s.lm_head);
      if (st.is_ok() && s.lm_head != "keep" && s.lm_head != "fp8" && s.lm_head != "nvfp4") {
        st = type_error(file, k, "\"keep\", \"fp8\" or \"nvfp4\"");
      }
    }
    else if (k == "kv_cache_dtype") {
      st = str(s.kv_cache_dtype);
      if (st.is_ok() && s.kv_cache_dtype != "auto" && s.kv_cache_dtype != "fp16" && s.kv_cache_dtype != "bf16" &&
          s.kv_cache_dtype != "fp8") {
        st = type_error(file, k, "\"auto\", \"fp16\", \"bf16\" or \"fp8\"");
      }
    }
    else if (k == "max_tokens_per_step") st = int32(s.max_tokens_per_step, 1, 1 << 20);
    else if (k == "prefill_chunk") st = int32(s.prefill_chunk, 1, 1 << 20);
    else if (k == "max_n") st = int32(s.max_n, 1, 128);
    else if (k == "speculative_k") {
      if (v.is_string() ? !parse_speculative_k(v.get<std::string>(), s.speculative_k) : !v.is_number_integer()) {
        st = type_error(file, k, "\"auto\" or an integer in [0, 31]");
      } else if (!v.is_string()) {
        st = int32(s.speculative_k, 0, 31);
      }
    }
    else if (k == "max_speculative_k") st = int32(s.max_speculative_k, 0, 31);
    else if (k == "draft_vocab") st = int32(s.draft_vocab, 0, 1 << 24);
    else if (k == "mtp_format") {
      st = str(s.mtp_format);
      if (st.is_ok() && s.mtp_format != "keep" && s.mtp_format != "nvfp4") st = type_error(file, k, "\"keep\" or \"nvfp4\"");
    }
    else if (k == "prefix_cache") st = boolean(s.prefix_cache);
    else if (k == "prefix_cache_snapshots") st = int32(s.prefix_cache_snapshots, 0, 1 << 16);
    else if (k == "prefix_snapshot_interval") st = int32(s.prefix_snapshot_interval, 0, 1 << 24);
    else if (k == "host") st = str(s.http.host);
    else if (k == "port") { st = int32(port, 0, 65535); s.http.port = port; }
    else if (k == "api_keys") st = strings(s.http.api_keys);
    else if (k == "cors_origins") st = strings(s.http.cors_origins);
    else if (k == "max_body_bytes") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1024) st = type_error(file, k, "an integer >= 1024");
      else s.http.max_body_bytes = static_cast<size_t>(v.get<int64_t>());
    }
    else if (k == "request_timeout") st = number(s.http.request_timeout_s);
    else if (k == "keepalive_interval") st = number(s.http.keepalive_interval_s);
    else if (k == "served_model_name") st = str(s.http.served_model_name);
    else if (k == "http_threads") { st = int32(http_threads, 0, 4096); s.http.http_threads = http_threads; }
    else if (k == "header_timeout") st = positive(s.http.header_timeout_s);
    else if (k == "body_timeout") st = positive(s.http.body_timeout_s);
    else if (k == "keep_alive_timeout") st = positive(s.http.keep_alive_timeout_s);
    else if (k == "write_timeout") st = positive(s.http.write_timeout_s);
    else if (k == "max_connections") st = int32(s.http.max_connections, 16, 1 << 20);
    else if (k == "max_connections_per_address") st = int32(s.http.max_connections_per_address, 0, 1 << 20);
    else if (k == "response_store_entries" || k == "response_store_mib") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 30)) {
        st = type_error(file, k, "an integer in [0, 2^30]");
      } else if (k == "response_store_entries") {
        s.http.response_store_entries = static_cast<size_t>(v.get<int64_t>());
      } else {
        s.http.response_store_bytes = static_cast<size_t>(v.get<int64_t>()) << 20;
      }
    }
    else if (k == "mirror_reasoning") {
      if (!v.is_boolean()) st = type_error(file, k, "a boolean");
      else s.http.mirror_reasoning = v.get<bool>();
    }
    else st = invalid_argument(fmt::format("{}: unknown key '{}' (see config/README.md)", file.string(), k));
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

std::filesystem::path default_model_dir() {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("models") / "demo";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      if (fs::exists(dir / rel / "config.json", ec)) return dir / rel;
    }
  }
  fs::path built_in = VOLTSERVE_DEFAULT_MODEL_DIR;
  if (!built_in.empty() && fs::exists(built_in / "config.json", ec)) return built_in;
  return rel;
}

}  // namespace voltserve::http
