// One stats interface (docs/using.md, "Counters"). Every counter TEMPI keeps is named once in
// stats.cpp's table; the mechanism that keeps it registers how to read it at its first use,
// so tools, tests and the log at MPI_Finalize read every counter the same way
// (TEMPIX_Counter in tempi.h) and never include a mechanism's header for it. A counter whose
// mechanism has not been used in this process reads 0.
#pragma once

#include <cstdint>
#include <string>

namespace tempi {

// A counter's reader: static storage, registered once.
struct CounterReader {
  const char *name;
  uint64_t (*read)();
};

// Registers `n` readers (each name must be in the table; an unknown one is a warning).
void register_counters(const CounterReader *readers, int n);

// The value of counter `name`: false when the table has no such name.
bool read_counter(const char *name, uint64_t &value);

// Every counter of the table that is not zero, "name=value" separated by spaces (the log).
std::string nonzero_counters();

}  // namespace tempi
