// The engine's named loggers (see loggers.h), through common/named_logger.
#include "core/loggers.h"

#include "common/named_logger.h"

namespace voltserve {

spdlog::logger& engine_log() { return named_logger("engine"); }
spdlog::logger& sched_log() { return named_logger("sched"); }

}  // namespace voltserve
