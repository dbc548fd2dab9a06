// One log line per decision, to stderr, prefixed with "[tempi]" and the rank once known.
#pragma once

#include <string>

#include "config.hpp"

namespace tempi {

void set_log_rank(int rank);
bool log_enabled(LogLevel level);
void log(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define TEMPI_LOG(level, ...)                                              \
  do {                                                                     \
    if (::tempi::log_enabled(::tempi::LogLevel::level)) ::tempi::log(::tempi::LogLevel::level, __VA_ARGS__); \
  } while (0)

}  // namespace tempi
