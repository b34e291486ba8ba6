// See sse.h. nlohmann's compact dump escapes newlines inside strings, so one event is always one line.
#include "openai/sse.h"

namespace voltserve::openai {

std::string sse_data(const Json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

}  // namespace voltserve::openai
