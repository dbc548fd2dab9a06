// Tiled pack/unpack of permuted strided plans (transposes, permutations of a grid's
// dimensions): plans whose packed order walks memory with a large inner stride, where
// the strided kernels of strided.cu touch one element per 32-byte sector on the typed
// side. Here a thread block stages a tile in shared memory so that both the typed and
// the packed side are read and written in coalesced rows (the classic tiled transpose).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels.hpp"

namespace tempi {

// Whether the tiled kernels move `a` (access width `word`, as for launch_strided) and
// win over launch_strided: the block is one word (1 to 16 bytes), and some outer
// dimension has a smaller stride than dimension 0, below a sector, with both at least
// a few elements long. Misaligned buffers or ranges (word below the block) do not.
bool tiled_transpose_fits(const StridedArgs &a, int word);

// Moves stream bytes [a.first, a.last) like launch_strided; requires tiled_transpose_fits(a, word).
Status launch_tiled_transpose(const StridedArgs &a, int word, const void *typed, void *packed, bool to_packed,
                              cudaStream_t stream);

}  // namespace tempi
