// `voltserve render --model DIR --request F.json`: prints exactly the prompt text the server feeds the model for a
// chat-completions request body (render_chat_prompt with DIR's chat template, bos and eos). `--template FILE`
// renders a bare .jinja file instead; `--context` prints the template variables; `--batch F.json` renders many
// cases in one process for the differential tests (tools/template_diff.py, which checks all of this against HF).
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_prompt.h"
#include "cli/commands.h"

namespace voltserve::cli {
namespace {

struct RenderArgs {
  std::string model;
  std::string template_file;
  std::string request = "-";
  std::string bos;
  std::string eos;
  bool no_generation_prompt = false;
  bool print_context = false;
  std::string batch;
};

[[noreturn]] void fail(const std::string& message, int code = 1) {
  std::cerr << "voltserve render: " << message << "\n";
  throw CLI::RuntimeError(code);
}

std::string read_all(const std::string& path, const char* what) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot open ") + what + " " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --batch: a JSON array of cases, each {"template": source, "variables": {...}} (rendered as-is) or
// {"template": source, "request": {...}, "add_generation_prompt": bool, "bos_token": s, "eos_token": s}
// (rendered through render_chat_prompt); prints an array of {"ok": true, "text": ...} or {"ok": false, "error": ...}.
void run_batch(const std::string& path) {
  nlohmann::ordered_json cases;
  try {
    cases = nlohmann::ordered_json::parse(read_all(path, "--batch"));
  } catch (const nlohmann::json::parse_error& e) {
    fail("--batch is not valid JSON: " + std::string(e.what()));
  }
  if (!cases.is_array()) fail("--batch must hold a JSON array");
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    nlohmann::ordered_json r;
    try {
      const auto tmpl = chat::ChatTemplate::parse(c.at("template").get<std::string>());
      std::string text;
      if (c.contains("variables")) {
        text = tmpl.render(c["variables"]);
      } else {
        text = chat::render_chat_prompt(tmpl, c.at("request"), c.value("bos_token", std::string()),
                                        c.value("eos_token", std::string()), c.value("add_generation_prompt", true));
      }
      r["ok"] = true;
      r["text"] = std::move(text);
    } catch (const chat::TemplateError& e) {
      r["ok"] = false;
      r["error"] = e.what();
      r["raised_by_template"] = e.raised_by_template();
    } catch (const std::exception& e) {
      r["ok"] = false;
      r["error"] = e.what();
    }
    results.push_back(std::move(r));
  }
  // Invalid UTF-8 cannot reach here (templates and JSON inputs are validated), but never let dump() throw.
  std::cout << results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

void run(const RenderArgs& args) {
  if (!args.batch.empty()) {
    run_batch(args.batch);
    return;
  }
  if (args.model.empty() == args.template_file.empty()) fail("give exactly one of --model DIR or --template FILE", 2);
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(read_all(args.request, "--request"));
  } catch (const nlohmann::json::parse_error& e) {
    fail("--request is not valid JSON: " + std::string(e.what()));
  }
  const bool has_tools = request.is_object() && request.contains("tools") && request["tools"].is_array() &&
                         !request["tools"].empty();

  chat::ModelChatTemplate model;
  if (!args.model.empty()) {
    try {
      model = chat::load_model_chat_template(args.model, has_tools);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  } else {
    model.source = read_all(args.template_file, "--template");
    model.origin = args.template_file;
    model.bos_token = args.bos;
    model.eos_token = args.eos;
  }
  // vLLM's request field add_generation_prompt (default true); --no-generation-prompt forces it off.
  bool add_generation_prompt = true;
  if (request.is_object() && request.contains("add_generation_prompt")) {
    if (!request["add_generation_prompt"].is_boolean()) fail("add_generation_prompt must be a boolean");
    add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }
  if (args.no_generation_prompt) add_generation_prompt = false;

  try {
    if (args.print_context) {
      std::cout << chat::build_template_context(request, model.bos_token, model.eos_token, add_generation_prompt).dump(2)
                << "\n";
      return;
    }
    const auto tmpl = chat::ChatTemplate::parse(model.source);
    std::cout << chat::render_chat_prompt(tmpl, request, model.bos_token, model.eos_token, add_generation_prompt);
    std::cout.flush();
  } catch (const chat::ChatRequestError& e) {
    fail(std::string("bad request: ") + e.what());
  } catch (const chat::TemplateError& e) {
    fail(std::string(e.what()) + " (template from " + model.origin + ")");
  }
}

}  // namespace

void register_render_command(CLI::App& app) {
  auto args = std::make_shared<RenderArgs>();
  auto* cmd = app.add_subcommand("render", "Print the prompt text a chat-completions request renders to");
  cmd->add_option("--model", args->model, "Model folder (chat_template.jinja or tokenizer_config.json)");
  cmd->add_option("--template", args->template_file, "A Jinja chat template file instead of a model folder");
  cmd->add_option("--request", args->request, "Request body JSON file, or - for stdin")->capture_default_str();
  cmd->add_option("--bos", args->bos, "bos_token for --template");
  cmd->add_option("--eos", args->eos, "eos_token for --template");
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt,
                "Do not append the assistant turn opening (add_generation_prompt=false)");
  cmd->add_flag("--context", args->print_context, "Print the template variables (JSON) instead of the prompt");
  cmd->add_option("--batch", args->batch, "Render a JSON array of test cases (see tools/template_diff.py)");
  cmd->callback([args] { run(*args); });
}

}  // namespace voltserve::cli
