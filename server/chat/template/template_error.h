// TemplateError: every parse and render failure of a chat template, with the template line (and column when known).
// Thrown by ChatTemplate::parse/render and by raise_exception(); tested in tests/chat/template_limits_test.cpp.
#pragma once

#include <stdexcept>
#include <string>

namespace voltserve::chat {

class TemplateError : public std::runtime_error {
 public:
  // line/column are 1-based; 0 means "not known (yet)": the evaluator fills in the line of the node that failed.
  explicit TemplateError(std::string message, int line = 0, int column = 0, bool raised_by_template = false)
      : std::runtime_error(format(message, line, column)),
        message_(std::move(message)),
        line_(line),
        column_(column),
        raised_by_template_(raised_by_template) {}

  int line() const { return line_; }
  int column() const { return column_; }
  // The message without the "chat template line N" prefix.
  const std::string& message() const { return message_; }
  // True for errors the template raised itself with raise_exception(...) (the caller's request is at fault).
  bool raised_by_template() const { return raised_by_template_; }

  TemplateError with_line(int line) const { return TemplateError(message_, line, column_, raised_by_template_); }

 private:
  static std::string format(const std::string& message, int line, int column) {
    if (line <= 0) return "chat template: " + message;
    std::string where = "chat template line " + std::to_string(line);
    if (column > 0) where += ", column " + std::to_string(column);
    return where + ": " + message;
  }

  std::string message_;
  int line_ = 0;
  int column_ = 0;
  bool raised_by_template_ = false;
};

}  // namespace voltserve::chat
