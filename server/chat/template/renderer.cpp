// Tree-walking renderer. Scoping follows jinja2: `for` bodies get a fresh scope per iteration (so `set` inside a loop
// does not leak), macros see their defining scope at call time, and `if` opens no scope.
#include "chat/template/renderer.h"

#include "chat/template/builtins.h"
#include "chat/template/operators.h"
#include "chat/template/py_format.h"
#include "chat/template/py_text.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {

struct Renderer::Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      for (const auto& [k, v] : s->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& [k, v] : vars) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    vars.emplace_back(name, std::move(value));
  }
};

namespace {

// Makes `child` the innermost scope while the guard lives.
template <class S>
class ScopeGuard {
 public:
  ScopeGuard(std::shared_ptr<S>& current, std::shared_ptr<S> child) : current_(current), saved_(current) {
    current_ = std::move(child);
  }
  ~ScopeGuard() { current_ = std::move(saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  std::shared_ptr<S>& current_;
  std::shared_ptr<S> saved_;
};

// The `loop` variable of one iteration.
Value make_loop(Renderer& r, const ValueList& items, size_t i) {
  auto ns = r.new_namespace("LoopContext");
  const auto n = static_cast<int64_t>(items.size());
  const auto idx = static_cast<int64_t>(i);
  ns->read_only = true;
  ns->attrs = {
      {"index0", Value(idx)},
      {"index", Value(idx + 1)},
      {"revindex0", Value(n - idx - 1)},
      {"revindex", Value(n - idx)},
      {"first", Value(idx == 0)},
      {"last", Value(idx == n - 1)},
      {"length", Value(n)},
      {"depth", Value(int64_t{1})},
      {"depth0", Value(int64_t{0})},
      {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
      {"nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined("there is no next item")},
  };
  ns->attrs.emplace_back("cycle", Value::callable("loop.cycle", [idx](Renderer&, CallArgs& a) -> Value {
    if (a.positional.empty()) throw TemplateError("no items for cycling given");
    return a.positional[static_cast<size_t>(idx) % a.positional.size()];
  }));
  return Value::make_namespace(std::move(ns));
}

}  // namespace

Renderer::~Renderer() {
  for (auto& weak : namespaces_) {
    if (auto ns = weak.lock()) ns->attrs.clear();
  }
}

std::shared_ptr<Namespace> Renderer::new_namespace(std::string display_name) {
  auto ns = std::make_shared<Namespace>();
  ns->display_name = std::move(display_name);
  if (namespaces_.size() > 1024 && namespaces_.size() % 1024 == 0) {
    // Forget namespaces that are already gone so long loops (one `loop` object per iteration) stay small.
    std::erase_if(namespaces_, [](const auto& w) { return w.expired(); });
  }
  namespaces_.push_back(ns);
  return ns;
}

void Renderer::count_steps(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    throw TemplateError("rendering takes more than " + std::to_string(limits_.max_steps) +
                        " steps (loop iterations, calls and filter items); is there a runaway loop?");
  }
}

void Renderer::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    throw TemplateError("rendered text would exceed " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

void Renderer::append(std::string& out, const std::string& text) const {
  check_size(out.size() + text.size());
  out += text;
}

std::string Renderer::render(const Body& body, const Value& context) {
  auto builtins = std::make_shared<Scope>();
  for (auto& [name, value] : make_globals()) builtins->set(name, std::move(value));
  globals_ = std::make_shared<Scope>();
  globals_->parent = builtins;
  if (context.is_dict()) {
    for (const auto& [k, v] : context.as_dict().items()) {
      if (k.is_string()) globals_->set(k.as_string(), v);
    }
  }
  scope_ = globals_;
  std::string out;
  exec_body(body, out);
  scope_.reset();
  globals_.reset();
  return out;
}

Renderer::Flow Renderer::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    const Flow flow = exec(*s, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& s, std::string& out) {
  try {
    switch (s.kind) {
      case StmtKind::kOutput:
        append(out, s.text);
        return Flow::kNormal;
      case StmtKind::kPrint:
        append(out, py_str(eval(*s.expr)));
        return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond).truthy()) return exec_body(body, out);
        }
        return exec_body(s.else_body, out);
      case StmtKind::kFor: {
        Flow flow = Flow::kNormal;
        exec_for(s, out, flow);
        return Flow::kNormal;
      }
      case StmtKind::kSet:
        exec_set(s);
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string captured;
        {
          auto child = std::make_shared<Scope>();
          child->parent = scope_;
          ScopeGuard guard(scope_, child);
          exec_body(s.body, captured);
        }
        Value v = s.filters.empty() ? Value(std::move(captured)) : apply_filter_chain(*s.filters[0], Value(std::move(captured)));
        assign(s.target, v, s.line);
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        exec_macro(s);
        return Flow::kNormal;
      case StmtKind::kCallBlock:
        exec_call_block(s, out);
        return Flow::kNormal;
      case StmtKind::kFilterBlock: {
        std::string captured;
        exec_body(s.body, captured);
        append(out, py_str(apply_filter_chain(*s.expr, Value(std::move(captured)))));
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        auto child = std::make_shared<Scope>();
        child->parent = scope_;
        for (const auto& [name, expr] : s.assignments) child->set(name, eval(*expr));
        ScopeGuard guard(scope_, child);
        return exec_body(s.body, out);
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kScope:
        return exec_body(s.body, out);
    }
  } catch (const TemplateError& e) {
    if (e.line() == 0) throw e.with_line(s.line);
    throw;
  }
  return Flow::kNormal;
}

void Renderer::exec_for(const Stmt& s, std::string& out, Flow& flow) {
  const Value iterable = eval(*s.expr);
  ValueList items = iterate(iterable);
  if (s.condition) {
    ValueList kept;
    for (auto& item : items) {
      count_steps();
      auto child = std::make_shared<Scope>();
      child->parent = scope_;
      ScopeGuard guard(scope_, child);
      assign(s.target, item, s.line);
      if (eval(*s.condition).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(s.else_body, out);
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    count_steps();
    auto child = std::make_shared<Scope>();
    child->parent = scope_;
    ScopeGuard guard(scope_, child);
    assign(s.target, items[i], s.line);
    scope_->set("loop", make_loop(*this, items, i));
    flow = exec_body(s.body, out);
    if (flow == Flow::kBreak) break;
  }
  flow = Flow::kNormal;
}

void Renderer::assign(const Target& target, const Value& value, int line) {
  if (!target.attr.empty()) {
    const Value* ns = scope_->find(target.names[0]);
    if (!ns || !ns->is_namespace() || ns->as_namespace().read_only) {
      throw TemplateError("cannot assign attribute on non-namespace object '" + target.names[0] + "'", line);
    }
    if (!target.attr.empty() && target.attr[0] == '_') {
      throw TemplateError("chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                              target.attr + "'",
                          line);
    }
    ns->as_namespace().set(target.attr, value);
    return;
  }
  if (!target.is_tuple) {
    scope_->set(target.names[0], value);
    return;
  }
  ValueList parts = iterate(value);
  if (value.is_dict() || value.is_undefined() || (!value.is_list() && !value.is_string())) {
    throw TemplateError(std::string("cannot unpack a value of type ") + value.type_name(), line);
  }
  if (parts.size() != target.names.size()) {
    throw TemplateError(parts.size() < target.names.size()
                            ? "not enough values to unpack (expected " + std::to_string(target.names.size()) +
                                  ", got " + std::to_string(parts.size()) + ")"
                            : "too many values to unpack (expected " + std::to_string(target.names.size()) + ")",
                        line);
  }
  for (size_t i = 0; i < parts.size(); ++i) scope_->set(target.names[i], parts[i]);
}

void Renderer::exec_set(const Stmt& s) { assign(s.target, eval(*s.expr), s.line); }

void Renderer::exec_macro(const Stmt& s) {
  std::weak_ptr<Scope> defined_in = scope_;
  const Stmt* macro = &s;
  scope_->set(s.name, Value::callable("macro '" + s.name + "'", [this, macro, defined_in](Renderer&, CallArgs& a) {
                return call_macro(*macro, defined_in, a, nullptr);
              }));
}

// `macro` is a kMacro statement, or a kCallBlock statement when its body runs as `caller()`.
Value Renderer::call_macro(const Stmt& macro, const std::weak_ptr<Scope>& defined_in, CallArgs& args,
                           const Value* caller) {
  const std::string name = macro.kind == StmtKind::kMacro ? macro.name : "caller";
  if (call_depth_ >= limits_.max_call_depth) {
    throw TemplateError("macro calls nested more than " + std::to_string(limits_.max_call_depth) +
                        " deep (runaway recursion?)");
  }
  count_steps();
  auto frame = std::make_shared<Scope>();
  auto parent = defined_in.lock();
  frame->parent = parent ? parent : globals_;
  Value caller_value = caller ? *caller : Value::undefined("no caller");
  // Positional parameters first, extra positionals go to `varargs`, unknown keywords to `kwargs` (jinja2 macros).
  ValueList varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < macro.params.size()) {
      frame->set(macro.params[i].name, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  Dict extra_kwargs;
  for (auto& [key, value] : args.keyword) {
    if (key == "caller") {
      caller_value = value;
      continue;
    }
    bool is_param = false;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      if (macro.params[i].name != key) continue;
      is_param = true;
      if (i < args.positional.size()) {
        throw TemplateError("macro '" + name + "' got multiple values for argument '" + key + "'");
      }
      frame->set(key, value);
    }
    if (!is_param) extra_kwargs.set(Value(key), value);
  }
  ScopeGuard guard(scope_, frame);
  ++call_depth_;
  struct DepthRestore {
    int& d;
    ~DepthRestore() { --d; }
  } restore{call_depth_};
  for (const auto& p : macro.params) {
    bool bound = false;
    for (const auto& [k, v] : frame->vars) bound = bound || k == p.name;
    if (bound) continue;
    frame->set(p.name, p.default_value ? eval(*p.default_value)
                                       : Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  frame->set("varargs", Value::list(std::move(varargs), true));
  frame->set("kwargs", Value::dict(std::move(extra_kwargs)));
  if (!caller_value.is_undefined()) frame->set("caller", caller_value);
  std::string out;
  exec_body(macro.body, out);
  return Value(std::move(out));
}

void Renderer::exec_call_block(const Stmt& s, std::string& out) {
  std::weak_ptr<Scope> defined_in = scope_;
  const Stmt* block = &s;
  // `caller()` renders the block body like a macro whose parameters are the call block's signature.
  Value caller = Value::callable("caller", [this, block, defined_in](Renderer&, CallArgs& a) {
    return call_macro(*block, defined_in, a, nullptr);
  });
  const Expr& call_expr = *s.expr;
  const Value callee = eval(*call_expr.operands[0]);
  CallArgs args = eval_args(call_expr, 1);
  args.keyword.emplace_back("caller", caller);
  append(out, py_str(call(callee, args)));
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.as_callable().fn(*this, args);
  if (callee.is_undefined()) throw_undefined(callee);
  throw TemplateError(std::string("'") + callee.type_name() + "' object is not callable");
}

Value Renderer::lookup(const std::string& name) const {
  if (const Value* v = scope_->find(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

// A filter chain parsed without input (`{% filter a|b %}`, `{% set x | a | b %}`): `outer` is the last filter and
// operands[0] links to the previous one, down to a null input; apply them from the inside out.
Value Renderer::apply_filter_chain(const Expr& outer, Value input) {
  std::vector<const Expr*> chain;
  for (const Expr* f = &outer; f; f = f->operands.empty() ? nullptr : f->operands[0].get()) chain.push_back(f);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    CallArgs args = eval_args(**it, 1);
    input = apply_filter(*this, (*it)->name, input, args);
  }
  return input;
}

CallArgs Renderer::eval_args(const Expr& e, size_t first_operand) {
  CallArgs args;
  for (size_t i = first_operand; i < e.operands.size(); ++i) args.positional.push_back(eval(*e.operands[i]));
  if (e.star_args) {
    const Value extra = eval(*e.star_args);
    for (auto& v : iterate(extra)) args.positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) args.keyword.emplace_back(name, eval(*expr));
  if (e.star_kwargs) {
    const Value extra = eval(*e.star_kwargs);
    if (!extra.is_dict()) throw TemplateError("argument after ** must be a mapping");
    for (const auto& [k, v] : extra.as_dict().items()) {
      if (!k.is_string()) throw TemplateError("keywords must be strings");
      args.keyword.emplace_back(k.as_string(), v);
    }
  }
  return args;
}

Value Renderer::eval(const Expr& e) {
  try {
    return eval_node(e);
  } catch (const TemplateError& err) {
    if (err.line() == 0) throw err.with_line(e.line);
    throw;
  }
}

Value Renderer::eval_call(const Expr& e) {
  const Value callee = eval(*e.operands[0]);
  CallArgs args = eval_args(e, 1);
  return call(callee, args);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.operands[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.operands[i + 1]);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") {
      ok = py_equal(left, right);
    } else if (op == "!=") {
      ok = !py_equal(left, right);
    } else if (op == "in" || op == "notin") {
      ok = contains(right, left) == (op == "in");
    } else {
      if (left.is_undefined()) throw_undefined(left);
      if (right.is_undefined()) throw_undefined(right);
      if (op == "<") {
        ok = py_less(left, right);
      } else if (op == ">") {
        ok = py_less(right, left);
      } else if (op == "<=") {
        ok = py_less(left, right) || py_equal(left, right);
      } else {  // ">="
        ok = py_less(right, left) || py_equal(left, right);
      }
    }
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Renderer::eval_node(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.constant;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kGetAttr:
      return get_attr(*this, eval(*e.operands[0]), e.name);
    case ExprKind::kGetItem: {
      const Value obj = eval(*e.operands[0]);
      return get_item(*this, obj, eval(*e.operands[1]));
    }
    case ExprKind::kSlice: {
      const Value obj = eval(*e.operands[0]);
      auto bound = [&](size_t i) { return e.operands[i] ? eval(*e.operands[i]) : Value::none(); };
      const Value start = bound(1), stop = bound(2), step = bound(3);
      if (obj.is_undefined()) throw_undefined(obj);
      return get_slice(obj, start, stop, step);
    }
    case ExprKind::kCall:
      return eval_call(e);
    case ExprKind::kFilter: {
      const Value input = e.operands[0] ? eval(*e.operands[0]) : Value::undefined("no filter input");
      CallArgs args = eval_args(e, 1);
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::kTest: {
      const Value input = eval(*e.operands[0]);
      CallArgs args = eval_args(e, 1);
      return Value(apply_test(*this, e.name, input, args) != e.negated);
    }
    case ExprKind::kNot:
      return Value(!eval(*e.operands[0]).truthy());
    case ExprKind::kNeg:
      return negate(eval(*e.operands[0]));
    case ExprKind::kPos:
      return unary_plus(eval(*e.operands[0]));
    case ExprKind::kBinary: {
      const Value a = eval(*e.operands[0]);
      const Value b = eval(*e.operands[1]);
      return binary_op(*this, e.name, a, b);
    }
    case ExprKind::kAnd: {
      Value a = eval(*e.operands[0]);
      return a.truthy() ? eval(*e.operands[1]) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.operands[0]);
      return a.truthy() ? a : eval(*e.operands[1]);
    }
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kCondExpr:
      if (eval(*e.operands[0]).truthy()) return eval(*e.operands[1]);
      if (e.operands[2]) return eval(*e.operands[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined");
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.operands.size());
      for (const auto& o : e.operands) items.push_back(eval(*o));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
        Value k = eval(*e.operands[i]);
        if (k.is_list() && !k.is_tuple()) throw TemplateError("unhashable type: 'list'");
        if (k.is_dict()) throw TemplateError("unhashable type: 'dict'");
        if (k.is_undefined()) throw_undefined(k);
        d.set(std::move(k), eval(*e.operands[i + 1]));
      }
      return Value::dict(std::move(d));
    }
  }
  throw TemplateError("internal error: unknown expression");
}

}  // namespace voltserve::chat
