// The syntax tree of a parsed template: expressions and statements, as produced by parser.cpp and walked by the
// renderer. Plain structs; the node kind selects which members are used.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/template/value.h"

namespace voltserve::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kConst,     // constant
  kName,      // name
  kGetAttr,   // operands[0].name
  kGetItem,   // operands[0][operands[1]]
  kSlice,     // operands[0][operands[1]:operands[2]:operands[3]] (null operands are omitted bounds)
  kCall,      // operands[0](operands[1..], kwargs, *star_args, **star_kwargs)
  kFilter,    // operands[0] | name(operands[1..], kwargs); operands[0] is null inside `{% filter %}` blocks
  kTest,      // operands[0] is [not] name(operands[1..], kwargs)
  kNot,       // not operands[0]
  kNeg,       // -operands[0]
  kPos,       // +operands[0]
  kBinary,    // operands[0] op operands[1]: + - * / // % ** ~
  kAnd,       // operands[0] and operands[1]
  kOr,        // operands[0] or operands[1]
  kCompare,   // operands[0] ops[0] operands[1] ops[1] operands[2] ... (chained like Python)
  kCondExpr,  // operands[1] if operands[0] else operands[2] (operands[2] may be null)
  kList,      // [operands...]
  kTuple,     // (operands...)
  kDict,      // {operands[0]: operands[1], operands[2]: operands[3], ...}
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value constant;                 // kConst
  std::string name;               // kName, kGetAttr, kFilter, kTest; operator for kBinary
  std::vector<ExprPtr> operands;  // see ExprKind
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall, kFilter, kTest
  ExprPtr star_args, star_kwargs;                       // kCall: *args, **kwargs
  std::vector<std::string> ops;                         // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  bool negated = false;                                 // kTest: `is not`
  int height = 1;                                       // 1 + the tallest child: bounds evaluation recursion
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kOutput,      // literal text
  kPrint,       // {{ expr }}
  kIf,          // if/elif/else
  kFor,         // for target in iter [if filter] ... [else] ...
  kSet,         // set target = expr
  kSetBlock,    // set name [| filters] ... endset
  kMacro,       // macro name(params) ... endmacro
  kCallBlock,   // call[(params)] macro(...) ... endcall
  kFilterBlock, // filter f ... endfilter
  kWith,        // with a = 1, b = 2 ... endwith
  kBreak,
  kContinue,
  kScope,       // a block rendered as-is ({% generation %})
};

// Assignment targets: a name, a namespace attribute (`ns.attr`), or a tuple of names (`for k, v in ...`).
struct Target {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  bool is_tuple = false;
  std::string attr;                // non-empty for `ns.attr`
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                                   // kOutput
  ExprPtr expr;                                       // kPrint, kSet, kFor (iterable), kCallBlock (call), kFilterBlock
  ExprPtr condition;                                  // kFor loop filter
  Target target;                                      // kSet, kFor, kSetBlock
  std::vector<std::pair<ExprPtr, Body>> branches;     // kIf: (condition, body) for if and each elif
  Body body;                                          // kFor, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith, kScope
  Body else_body;                                     // kIf, kFor
  std::string name;                                   // kMacro
  std::vector<MacroParam> params;                     // kMacro, kCallBlock (caller parameters)
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kWith
  std::vector<ExprPtr> filters;                       // kSetBlock: filters applied to the captured text
  bool recursive = false;                             // kFor: `recursive` (not supported, rejected at parse)
};

}  // namespace voltserve::chat
