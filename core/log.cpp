#include "log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace tempi {

static std::atomic<int> g_rank{-1};

void set_log_rank(int rank) { g_rank = rank; }

bool log_enabled(LogLevel level) { return int(level) <= int(config().log_level); }

void log(LogLevel level, const char *fmt, ...) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  const int rank = g_rank.load();
  if (rank >= 0)
    std::fprintf(stderr, "[tempi %d] %s: %s\n", rank, names[int(level)], line);
  else
    std::fprintf(stderr, "[tempi] %s: %s\n", names[int(level)], line);
}

}  // namespace tempi
