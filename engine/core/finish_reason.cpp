// Names of FinishReason values (request.h), as OpenAI's finish_reason spells the ones it has.
#include "voltserve/request.h"

namespace voltserve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

}  // namespace voltserve
