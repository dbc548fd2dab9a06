// Every threshold by which cuda/ chooses how to move an object (dispatch.cu and the
// strategies it calls), in one place, as CUB keeps its tuning policies: each with the
// one line that says why it has its value. Limits that a kernel's code imposes (its
// parameter space, its index width) live beside that kernel instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tempi {
namespace policy {

// --- One-shot moves (dispatch.cu, pitched_copy) -----------------------------------------
// A pitched copy of up to this many rows beat a kernel on mapped host memory (8.2-8.5 us
// against 11.2-11.3 us for 1 KiB in 128 rows, H200, bench_p2p, 2026-11-22); the engines
// take each row separately, so objects of more, shorter rows go to the kernel.
constexpr int64_t kMaxPitchedRows = 1024;

// --- Fused and open launches (dispatch.cu, fused.cu, open_launch.cpp) -------------------
// Objects above this go alone: their own kernel (tiled, a grid sized to it) or the copy
// engines for one contiguous run beat a shared launch's tiles by more than a launch costs
// (about 4 us on an H100, bench_call) once they move megabytes. Below it a contiguous run
// joins too: a halo's corners and x-edges are single runs, and each one alone would close
// an open launch between two ghost faces.
constexpr int64_t kOpenMaxBytes = int64_t(1) << 20;
// From here a transpose or permutation leaves the fused launch for the tiled kernels: the
// fused kernel is 0.66-0.87 us per MB slower (issue 19, H200), a launch costs about 4 us.
constexpr int64_t kAloneTranspose = int64_t(4) << 20;
// An open launch closes this long after its last join. MPI_Pack/MPI_Unpack calls come
// about 2 us apart (bench_pack_sequence on an H100); what waits for the launch to end (the
// application's synchronization, its next kernel on the legacy default stream) waits this
// much longer, plus the timer thread's wake-up and the kernel's drain (about 11 us more,
// measured with 20 us here). A call that comes later opens a new launch.
constexpr int64_t kOpenIdleMicroseconds = 10;
// Repetition dimensions of a fused object: what the fused kernel's descriptions hold.
constexpr int kMaxFusedDims = 4;
// Objects and pairs per fused launch: what fits the kernel's parameter space.
constexpr int kMaxFusedObjects = 48;
constexpr int kMaxFusedPairs = 32;
// A batch of more items than this goes to the kernel as a pointer to a device table:
// copying the parameter at every launch cost a quarter of a halo exchange's own time.
constexpr int kParameterItems = 4;
// Device tables a thread keeps per stream, so a batch that repeats byte for byte (the same
// exchange again) launches from its table with no transfer.
constexpr int kTablesPerStream = 8;

// --- Block lists (blocklist.cu, long_blocks.cu, small_pattern.cu) -----------------------
// Plans whose blocks average this many bytes or more take the warp-per-piece kernel: the
// byte-balanced kernel finds the block of every 16-byte window, which costs more than
// moving it once blocks are long (long_blocks.cu's measurements).
constexpr int64_t kLongBlockBytes = 256;
// Small patterns take the tiled kernel (small_pattern.cu): at most this many packed bytes
// and typed span per instance, what its shared-memory tile and access tables are sized for.
constexpr int64_t kMaxSmallPattern = 2048;
constexpr int64_t kMaxSmallSpan = 2048;
// Patterns of more blocks or pieces than this are not cut into groups (the search reads
// every block; the kernel reads an offset per group), nor are groups of more blocks: a
// gathered shape is a block, a struct or a vector.
constexpr int64_t kMaxGroups = int64_t(1) << 22;
constexpr int64_t kMaxGroupBlocks = 2048;
constexpr int64_t kMaxBlocksPerRun = 4;

// --- Tiled transposes (transpose.cu) ------------------------------------------------------
// Elements along each swapped dimension for tiles to pay (a tile staged in shared memory
// for fewer rows or columns moves little more than the strided kernel would).
constexpr int64_t kMinSide = 8;

// --- Typed-to-typed moves (pairs.cu) ------------------------------------------------------
// Paired runs move a pair in one pass where runs average this many bytes; shorter runs
// are not worth a warp each, and the pair goes through its scratch (pack, then unpack).
constexpr int64_t kMinPairedRun = 256;
// At most this many runs per pair, and this much device memory for all pairs' runs
// (entries are kept, plan ids never being reused): beyond them a pair goes through scratch.
constexpr size_t kMaxPairedRuns = size_t(1) << 18;
constexpr size_t kMaxPairedBytes = size_t(64) << 20;

}  // namespace policy
}  // namespace tempi
