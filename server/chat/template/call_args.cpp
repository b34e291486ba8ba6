// ArgBinder and iterate(): shared plumbing of filters, tests, methods and globals.
#include "chat/template/builtins.h"
#include "chat/template/py_text.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {

ArgBinder::ArgBinder(const CallArgs& args, std::string what, std::vector<const char*> names)
    : bound_(names.size(), nullptr) {
  if (args.positional.size() > names.size()) {
    throw TemplateError(what + " takes at most " + std::to_string(names.size()) + " argument(s) (" +
                        std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < names.size() && key != names[i]) ++i;
    if (i == names.size()) throw TemplateError(what + " got an unexpected keyword argument '" + key + "'");
    if (bound_[i]) throw TemplateError(what + " got multiple values for argument '" + key + "'");
    bound_[i] = &value;
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      ValueList keys;
      keys.reserve(v.as_dict().size());
      for (const auto& [k, e] : v.as_dict().items()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      const std::string& s = v.as_string();
      if (py::is_ascii(s)) {
        chars.reserve(s.size());
        for (char c : s) chars.emplace_back(std::string(1, c));
      } else {
        for (char32_t cp : py::decode(s)) {
          std::string one;
          py::append_utf8(one, cp);
          chars.emplace_back(std::move(one));
        }
      }
      return chars;
    }
    default:
      throw TemplateError(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

}  // namespace voltserve::chat
