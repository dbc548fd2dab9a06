// What the benchmarks in tools/ print in their headers: when, and which MPI library.
#pragma once

#include <mpi.h>

#include <ctime>
#include <string>

namespace tempi::tools {

// The time now, "YYYY-MM-DD HH:MM UTC": results are quoted with their date.
inline std::string utc_now() {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The first line of MPI_Get_library_version, each run of blanks one space (MPICH puts a
// tab after "Version:").
inline std::string library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string line(version);
  line = line.substr(0, line.find('\n'));
  std::string out;
  for (const char c : line) {
    const bool blank = c == ' ' || c == '\t' || c == '\r';
    if (!blank) out += c;
    else if (!out.empty() && out.back() != ' ') out += ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace tempi::tools
