// Status and Result<T>: how the engine reports failure across its API (no exceptions cross it).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace voltserve {

enum class StatusCode {
  kOk,
  kInvalidArgument,    // the caller's input is wrong (user-facing: 400)
  kNotFound,           // a file, tensor or request that does not exist
  kOutOfRange,         // a size or index beyond a limit (e.g. context length)
  kResourceExhausted,  // a pool or queue is full (429)
  kUnavailable,        // draining, loading or faulted (503)
  kDataLoss,           // a file is truncated or lies about its contents
  kUnimplemented,      // a known feature that is not supported
  kCancelled,
  kInternal,           // a bug or a device fault
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: <message>"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).is_ok() && "Result built from an OK status carries no value");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace voltserve

// Early return of a failed Status / Result from a function that returns Status or Result.
#define VS_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    auto vs_status_ = (expr);                     \
    if (!vs_status_.is_ok()) return vs_status_;   \
  } while (0)

#define VS_CONCAT_INNER_(a, b) a##b
#define VS_CONCAT_(a, b) VS_CONCAT_INNER_(a, b)
#define VS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.is_ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
// VS_ASSIGN_OR_RETURN(auto x, make_x());
#define VS_ASSIGN_OR_RETURN(lhs, expr) VS_ASSIGN_OR_RETURN_IMPL_(VS_CONCAT_(vs_result_, __LINE__), lhs, expr)
