// Recursive-descent Jinja parser; function names match jinja2/parser.py so the two can be read side by side.
#include "chat/template/parser.h"

#include <algorithm>
#include <cstdlib>

#include "chat/template/builtins.h"
#include "chat/template/lexer.h"
#include "chat/template/limits.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_statements({});
    if (cur().type != TokenType::kEof) fail("unexpected end tag");
    return body;
  }

 private:
  // RAII guard bounding recursion: deep nesting in a hostile template must not overflow the stack.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) {
        p_.fail("template nesting is deeper than " + std::to_string(kMaxParseDepth) + " levels");
      }
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    Parser& p_;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[i_ + 1 < t_.size() ? i_ + 1 : i_]; }
  const Token& next() {
    const Token& tok = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return tok;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw TemplateError(message, cur().line, cur().column);
  }
  [[noreturn]] void fail_at(const std::string& message, const Token& tok) const {
    throw TemplateError(message, tok.line, tok.column);
  }

  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case TokenType::kData: return "template data";
      case TokenType::kVarBegin: return "begin of print statement";
      case TokenType::kVarEnd: return "end of print statement";
      case TokenType::kBlockBegin: return "begin of statement block";
      case TokenType::kBlockEnd: return "end of statement block";
      case TokenType::kEof: return "end of template";
      case TokenType::kString: return "string";
      default: return "'" + tok.value + "'";
    }
  }

  bool is_op(const char* op) const { return cur().type == TokenType::kOperator && cur().value == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::kName && cur().value == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) fail("expected a name, got " + describe(cur()));
    return next().value;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) fail("expected end of statement block, got " + describe(cur()));
    next();
  }

  static ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Computes the node's height once its children are attached; long chains like `a.b.c...` or `1+1+1...` nest the
  // tree without recursing in the parser, so the tree height is bounded here as well.
  ExprPtr seal(ExprPtr e) {
    int h = 0;
    auto visit = [&](const ExprPtr& c) {
      if (c) h = std::max(h, c->height);
    };
    for (const auto& c : e->operands) visit(c);
    for (const auto& kv : e->kwargs) visit(kv.second);
    visit(e->star_args);
    visit(e->star_kwargs);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) {
      throw TemplateError("expression nested more than " + std::to_string(kMaxExprHeight) + " levels deep", e->line);
    }
    return e;
  }

  static StmtPtr make_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // ---- statements ----

  // Parses statements until a block tag whose keyword is in `end_tokens` (left unconsumed, after `{%`).
  Body parse_statements(const std::vector<std::string>& end_tokens) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& tok = cur();
      switch (tok.type) {
        case TokenType::kEof:
          if (!end_tokens.empty()) {
            std::string expected;
            for (const auto& e : end_tokens) expected += (expected.empty() ? "'" : " or '") + e + "'";
            fail("unexpected end of template; expected " + expected);
          }
          return body;
        case TokenType::kData: {
          auto s = make_stmt(StmtKind::kOutput, tok.line);
          s->text = next().value;
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kVarBegin: {
          next();
          auto s = make_stmt(StmtKind::kPrint, tok.line);
          s->expr = parse_tuple(true, {});
          if (cur().type != TokenType::kVarEnd) fail("expected end of print statement, got " + describe(cur()));
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          const Token& keyword = look();
          if (keyword.type == TokenType::kName) {
            for (const auto& e : end_tokens) {
              if (keyword.value == e) {
                next();  // `{%`; the caller consumes the keyword
                return body;
              }
            }
          }
          next();
          body.push_back(parse_statement());
          break;
        }
        default:
          fail("unexpected " + describe(tok));
      }
    }
  }

  StmtPtr parse_statement() {
    const Token& tok = cur();
    if (tok.type != TokenType::kName) fail("tag name expected");
    const std::string& k = tok.value;
    if (k == "if") return parse_if();
    if (k == "for") return parse_for();
    if (k == "set") return parse_set();
    if (k == "macro") return parse_macro();
    if (k == "call") return parse_call_block();
    if (k == "filter") return parse_filter_block();
    if (k == "with") return parse_with();
    if (k == "print") {
      next();
      auto s = make_stmt(StmtKind::kPrint, tok.line);
      s->expr = parse_tuple(true, {});
      expect_block_end();
      return s;
    }
    if (k == "break" || k == "continue") {
      if (loop_depth_ == 0) fail("'" + k + "' outside of a loop");
      auto s = make_stmt(k == "break" ? StmtKind::kBreak : StmtKind::kContinue, tok.line);
      next();
      expect_block_end();
      return s;
    }
    if (k == "generation") {  // transformers' AssistantTracker extension: renders its body unchanged
      next();
      expect_block_end();
      auto s = make_stmt(StmtKind::kScope, tok.line);
      s->body = parse_statements({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (k == "include" || k == "import" || k == "from" || k == "extends" || k == "block") {
      fail("'" + k + "' is not supported in chat templates (there is no template loader)");
    }
    fail("encountered unknown tag '" + k + "'");
  }

  StmtPtr parse_if() {
    auto s = make_stmt(StmtKind::kIf, cur().line);
    next();
    while (true) {
      ExprPtr cond = parse_tuple(false, {});
      expect_block_end();
      Body body = parse_statements({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string kw = next().value;
      if (kw == "elif") continue;
      if (kw == "else") {
        expect_block_end();
        s->else_body = parse_statements({"endif"});
        next();
      }
      expect_block_end();
      return s;
    }
  }

  StmtPtr parse_for() {
    auto s = make_stmt(StmtKind::kFor, cur().line);
    next();
    s->target = parse_assign_target(false, {"in"});
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) s->condition = parse_expression(true);
    if (skip_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"});
    --loop_depth_;
    if (next().value == "else") {
      expect_block_end();
      s->else_body = parse_statements({"endfor"});
      next();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    const int line = cur().line;
    next();
    Target target = parse_assign_target(true, {});
    if (skip_op("=")) {
      auto s = make_stmt(StmtKind::kSet, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {});
      expect_block_end();
      return s;
    }
    if (target.is_tuple || !target.attr.empty()) fail("block assignment needs a plain name");
    auto s = make_stmt(StmtKind::kSetBlock, line);
    s->target = std::move(target);
    while (is_op("|")) {
      s->filters.push_back(parse_filter(nullptr, false));
    }
    expect_block_end();
    const int saved_loop_depth = loop_depth_;
    s->body = parse_statements({"endset"});
    loop_depth_ = saved_loop_depth;
    next();
    expect_block_end();
    return s;
  }

  // for targets (`a` or `a, b`) and set targets (`a`, `a, b`, `ns.attr`).
  Target parse_assign_target(bool with_namespace, const std::vector<std::string>& extra_end) {
    Target target;
    while (true) {
      if (!target.names.empty()) {
        if (!skip_op(",")) break;
        target.is_tuple = true;
      }
      if (cur().type == TokenType::kBlockEnd || is_op(")") || is_op("=")) break;
      bool end = false;
      for (const auto& e : extra_end) end = end || is_name(e.c_str());
      if (end) break;
      if (cur().type != TokenType::kName) fail("can't assign to " + describe(cur()));
      const std::string name = next().value;
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None") {
        fail("can't assign to constant '" + name + "'");
      }
      if (with_namespace && is_op(".") && target.names.empty()) {
        next();
        target.attr = expect_name();
        target.names.push_back(name);
        return target;
      }
      target.names.push_back(name);
      if (!is_op(",")) break;
    }
    if (target.names.empty()) fail("expected an assignment target, got " + describe(cur()));
    return target;
  }

  std::vector<MacroParam> parse_signature() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
      } else {
        for (const auto& q : params) {
          if (q.default_value) fail("non-default argument follows default argument");
        }
      }
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(StmtKind::kMacro, cur().line);
    next();
    s->name = expect_name();
    s->params = parse_signature();
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    s->body = parse_statements({"endmacro"});
    loop_depth_ = saved;
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make_stmt(StmtKind::kCallBlock, cur().line);
    next();
    if (is_op("(")) s->params = parse_signature();
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::kCall) fail("expected a call expression in the call block");
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endcall"});
    loop_depth_ = saved;
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(StmtKind::kFilterBlock, cur().line);
    next();
    s->expr = parse_filter(nullptr, true);
    expect_block_end();
    s->body = parse_statements({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(StmtKind::kWith, cur().line);
    next();
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    next();
    s->body = parse_statements({"endwith"});
    next();
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == TokenType::kVarEnd || cur().type == TokenType::kBlockEnd || is_op(")")) return true;
    for (const auto& e : extra_end) {
      if (is_name(e.c_str())) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("expected an expression, got " + describe(cur()));
    }
    auto e = make(ExprKind::kTuple, line);
    e->operands = std::move(args);
    return seal(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      auto e = make(ExprKind::kCondExpr, line);
      e->operands.push_back(std::move(expr2));
      e->operands.push_back(std::move(expr1));
      e->operands.push_back(std::move(expr3));
      expr1 = seal(std::move(e));
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, int line, ExprPtr a, ExprPtr b, std::string op = {}) {
    auto e = make(kind, line);
    e->name = std::move(op);
    e->operands.push_back(std::move(a));
    e->operands.push_back(std::move(b));
    return seal(std::move(e));
  }

  ExprPtr parse_or() {
    const int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(ExprKind::kOr, line, std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    const int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary(ExprKind::kAnd, line, std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const int line = next().line;
      auto e = make(ExprKind::kNot, line);
      e->operands.push_back(parse_not());
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rest;
    while (true) {
      if (cur().type == TokenType::kOperator &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        ops.push_back(next().value);
      } else if (skip_name("in")) {
        ops.push_back("in");
      } else if (is_name("not") && look().type == TokenType::kName && look().value == "in") {
        next();
        next();
        ops.push_back("notin");
      } else {
        break;
      }
      rest.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = make(ExprKind::kCompare, line);
    e->operands.push_back(std::move(first));
    for (auto& r : rest) e->operands.push_back(std::move(r));
    e->ops = std::move(ops);
    return seal(std::move(e));
  }

  ExprPtr parse_math1() {
    const int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().value;
      left = binary(ExprKind::kBinary, line, std::move(left), parse_concat(), std::move(op));
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = binary(ExprKind::kBinary, line, std::move(left), parse_math2(), "~");
    return left;
  }

  ExprPtr parse_math2() {
    const int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().value;
      left = binary(ExprKind::kBinary, line, std::move(left), parse_pow(), std::move(op));
    }
    return left;
  }

  ExprPtr parse_pow() {
    const int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary(ExprKind::kBinary, line, std::move(left), parse_unary(true), "**");
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const int line = cur().line;
    ExprPtr node;
    if (skip_op("-")) {
      node = make(ExprKind::kNeg, line);
      node->operands.push_back(parse_unary(false));
      node = seal(std::move(node));
    } else if (skip_op("+")) {
      node = make(ExprKind::kPos, line);
      node->operands.push_back(parse_unary(false));
      node = seal(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    switch (tok.type) {
      case TokenType::kName: {
        next();
        auto e = make(ExprKind::kConst, tok.line);
        if (tok.value == "true" || tok.value == "True") {
          e->constant = Value(true);
        } else if (tok.value == "false" || tok.value == "False") {
          e->constant = Value(false);
        } else if (tok.value == "none" || tok.value == "None") {
          e->constant = Value::none();
        } else {
          e->kind = ExprKind::kName;
          e->name = tok.value;
        }
        return e;
      }
      case TokenType::kString: {
        auto e = make(ExprKind::kConst, tok.line);
        std::string s = next().value;
        while (cur().type == TokenType::kString) s += next().value;  // adjacent literals concatenate
        e->constant = Value(std::move(s));
        return e;
      }
      case TokenType::kInteger: {
        auto e = make(ExprKind::kConst, tok.line);
        e->constant = Value(static_cast<int64_t>(std::strtoll(next().value.c_str(), nullptr, 10)));
        return e;
      }
      case TokenType::kFloat: {
        auto e = make(ExprKind::kConst, tok.line);
        e->constant = Value(std::strtod(next().value.c_str(), nullptr));
        return e;
      }
      case TokenType::kOperator:
        if (tok.value == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (tok.value == "[") return parse_list();
        if (tok.value == "{") return parse_dict();
        break;
      default:
        break;
    }
    fail("unexpected " + describe(tok));
  }

  ExprPtr parse_list() {
    auto e = make(ExprKind::kList, cur().line);
    expect_op("[");
    while (!is_op("]")) {
      if (!e->operands.empty()) expect_op(",");
      if (is_op("]")) break;
      e->operands.push_back(parse_expression(true));
    }
    expect_op("]");
    return seal(std::move(e));
  }

  ExprPtr parse_dict() {
    auto e = make(ExprKind::kDict, cur().line);
    expect_op("{");
    while (!is_op("}")) {
      if (!e->operands.empty()) expect_op(",");
      if (is_op("}")) break;
      e->operands.push_back(parse_expression(true));
      expect_op(":");
      e->operands.push_back(parse_expression(true));
    }
    expect_op("}");
    return seal(std::move(e));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& tok = next();
    if (tok.value == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::kName) {
        auto e = make(ExprKind::kGetAttr, tok.line);
        e->name = attr.value;
        e->operands.push_back(std::move(node));
        return seal(std::move(e));
      }
      if (attr.type != TokenType::kInteger) fail_at("expected name or number", attr);
      auto e = make(ExprKind::kGetItem, tok.line);
      auto idx = make(ExprKind::kConst, attr.line);
      idx->constant = Value(static_cast<int64_t>(std::strtoll(attr.value.c_str(), nullptr, 10)));
      e->operands.push_back(std::move(node));
      e->operands.push_back(std::move(idx));
      return seal(std::move(e));
    }
    // `[`: one subscript (possibly a slice) or several, which form a tuple key.
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) fail_at("expected subscript expression", tok);
    if (args.size() == 1 && args[0]->kind == ExprKind::kSlice) {
      args[0]->operands.insert(args[0]->operands.begin(), std::move(node));
      return seal(std::move(args[0]));
    }
    auto e = make(ExprKind::kGetItem, tok.line);
    e->operands.push_back(std::move(node));
    if (args.size() == 1) {
      e->operands.push_back(std::move(args[0]));
    } else {
      auto t = make(ExprKind::kTuple, tok.line);
      for (auto& a : args) {
        if (a->kind == ExprKind::kSlice) fail_at("slices inside tuple subscripts are not supported", tok);
        t->operands.push_back(std::move(a));
      }
      e->operands.push_back(seal(std::move(t)));
    }
    return seal(std::move(e));
  }

  // One subscript: an expression, or a slice `a:b:c` (returned as kSlice without its object operand).
  ExprPtr parse_subscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    if (skip_op(":")) {
      args.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!skip_op(":")) return node;
      args.push_back(std::move(node));
    }
    if (is_op(":")) {
      args.push_back(nullptr);
    } else if (!is_op("]") && !is_op(",")) {
      args.push_back(parse_expression(true));
    } else {
      args.push_back(nullptr);
    }
    if (skip_op(":")) {
      args.push_back(!is_op("]") && !is_op(",") ? parse_expression(true) : nullptr);
    } else {
      args.push_back(nullptr);
    }
    auto e = make(ExprKind::kSlice, line);
    e->operands = std::move(args);
    return e;  // sealed by parse_subscript once the sliced object is attached
  }

  void parse_call_args(Expr& e) {
    const Token& open = cur();
    expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail_at("invalid syntax for function call expression", open);
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        ensure(!e.star_args && !e.star_kwargs);
        next();
        e.star_args = parse_expression(true);
      } else if (is_op("**")) {
        ensure(!e.star_kwargs);
        next();
        e.star_kwargs = parse_expression(true);
      } else if (cur().type == TokenType::kName && look().type == TokenType::kOperator && look().value == "=") {
        ensure(!e.star_kwargs);
        std::string key = next().value;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!e.star_args && !e.star_kwargs && e.kwargs.empty());
        e.operands.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::kCall, cur().line);
    e->operands.push_back(std::move(node));
    parse_call_args(*e);
    return seal(std::move(e));
  }

  // `| name(args)` (several when chained); `start_inline` for `{% filter name %}` where no `|` comes first.
  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const Token& name_tok = cur();
      std::string name = expect_name();
      while (skip_op(".")) name += "." + expect_name();
      if (!has_filter(name)) fail_at("no filter named '" + name + "'", name_tok);
      auto e = make(ExprKind::kFilter, name_tok.line);
      e->name = std::move(name);
      e->operands.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      if (e->star_args || e->star_kwargs) fail_at("*args and **kwargs in filter calls are not supported", name_tok);
      node = seal(std::move(e));
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const Token& is_tok = next();
    const bool negated = skip_name("not");
    const Token& name_tok = cur();
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    if (!has_test(name)) fail_at("no test named '" + name + "'", name_tok);
    auto e = make(ExprKind::kTest, is_tok.line);
    e->name = std::move(name);
    e->negated = negated;
    e->operands.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*e);
      if (e->star_args || e->star_kwargs) fail_at("*args and **kwargs in tests are not supported", name_tok);
    } else {
      const Token& c = cur();
      const bool starts_arg =
          c.type == TokenType::kName || c.type == TokenType::kString || c.type == TokenType::kInteger ||
          c.type == TokenType::kFloat || (c.type == TokenType::kOperator && (c.value == "[" || c.value == "{"));
      if (starts_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail("you cannot chain multiple tests with is");
        e->operands.push_back(parse_postfix(parse_primary()));
      }
    }
    return seal(std::move(e));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace voltserve::chat
