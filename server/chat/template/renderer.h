// Renderer: walks the syntax tree with Jinja's scoping rules (a fresh scope per loop iteration and macro call,
// `set` writing to the innermost scope, namespaces as the way out) and produces the output text within RenderLimits.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/template/ast.h"
#include "chat/template/limits.h"
#include "chat/template/value.h"

namespace voltserve::chat {

class Renderer {
 public:
  explicit Renderer(const RenderLimits& limits) : limits_(limits) {}
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Renders `body` with the variables of `context` (a dict) on top of the built-in globals.
  std::string render(const Body& body, const Value& context);

  // Services for filters, tests, methods and globals.
  Value call(const Value& callee, CallArgs& args);
  // Counts work (loop iterations, calls, items a filter walks); throws once max_steps is exceeded.
  void count_steps(int64_t n = 1);
  // Throws when a string of `bytes` would exceed the output limit.
  void check_size(size_t bytes) const;
  std::shared_ptr<Namespace> new_namespace(std::string display_name);
  const RenderLimits& limits() const { return limits_; }

 private:
  struct Scope;
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out, Flow& flow);
  void exec_set(const Stmt& s);
  void exec_macro(const Stmt& s);
  void exec_call_block(const Stmt& s, std::string& out);
  void assign(const Target& target, const Value& value, int line);
  void append(std::string& out, const std::string& text) const;

  Value eval(const Expr& e);
  Value eval_node(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_compare(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first_operand);
  Value apply_filter_chain(const Expr& outer, Value input);
  Value lookup(const std::string& name) const;
  Value call_macro(const Stmt& macro, const std::weak_ptr<Scope>& defined_in, CallArgs& args, const Value* caller);

  const RenderLimits limits_;
  std::shared_ptr<Scope> scope_;    // innermost scope
  std::shared_ptr<Scope> globals_;  // template top level (its parent holds the built-ins)
  int64_t steps_ = 0;
  int call_depth_ = 0;
  // Every namespace made during the render; cleared at the end so reference cycles between them cannot leak.
  std::vector<std::weak_ptr<Namespace>> namespaces_;
};

}  // namespace voltserve::chat
