// The tiled transpose kernels (transpose.hpp): a thread block stages a tile of a permuted
// strided plan in shared memory so that both sides move in coalesced rows.
#include <cuda_runtime.h>

#include "check.hpp"
#include "transpose.hpp"

namespace tempi {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kSector = 32;   // bytes: DRAM's access granularity, what a strided access wastes
constexpr uint32_t kMaxGridYZ = 65535;
constexpr uint64_t kMaxIndex32 = uint64_t(1) << 32;

template <int W>
struct WordOf;
template <> struct WordOf<1> { using type = uint8_t; };
template <> struct WordOf<2> { using type = uint16_t; };
template <> struct WordOf<4> { using type = uint32_t; };
template <> struct WordOf<8> { using type = uint64_t; };
template <> struct WordOf<16> { using type = uint4; };

// Tile side in elements: 32 for words of 4 bytes or more (rows of 128-512 bytes, the
// classic tile); 64 for 1- and 2-byte words, so that a warp's row is still 64-128 bytes.
constexpr int tile_side(int word) { return word >= 4 ? 32 : 64; }
// Padding of each tile row, in words, so that a warp walking a column of the tile hits
// distinct banks: rows of an odd number of 4-byte banks for words up to 4 bytes, one
// word more for wider words (served in half- and quarter-warp phases).
constexpr int tile_pad(int word) { return word >= 4 ? 1 : 4 / word; }
// Thread blocks resident per SM that the register budget must allow: a full SM (2048
// threads) for 4- and 8-byte words, whose loads in flight are what keeps DRAM busy; fewer
// where the cap would spill (16-byte words hold 64 bytes a thread, 1- and 2-byte words
// move 16 elements a thread).
constexpr int min_blocks(int word) { return word == 4 || word == 8 ? 8 : word == 16 ? 6 : 4; }

// The plan seen as tiles over two dimensions that swap: dimension 0 (a: the packed
// order's innermost, a large stride in memory) and dimension j (b: a small stride).
// The dimensions between them (inner) and above j (outer) index batches of tiles. A
// band is one outer index and one tile's worth of b: a contiguous piece of the stream.
// Stream positions are in words; typed offsets in bytes.
struct TileArgs {
  int64_t start;
  int64_t count_a, stride_a, count_b, stride_b;
  int64_t packed_b;      // stream words from one b to the next: count_a × inner
  int64_t packed_outer;  // stream words from one outer index to the next: packed_b × count_b
  uint32_t tiles_a, tiles_b;  // tiles along a; along b within one outer index
  uint32_t inner;             // inner batches: the product of the inner counts
  uint32_t first_band, bands; // the bands this launch covers (those meeting [first, last))
  int ninner, nouter;          // batch dimensions: the inner ones first, then the outer ones
  uint32_t counts[kMaxKernelDims];
  int64_t strides[kMaxKernelDims];
  int64_t first, last;  // stream words moved; the packed buffer starts at word `first`
  bool whole;            // [first, last) is the whole stream: no tile needs a range check
};

// The typed offset of index `i` of the dimensions (counts, strides), innermost first.
__device__ __forceinline__ int64_t offset_of(uint32_t i, int n, const uint32_t *counts, const int64_t *strides) {
  int64_t off = 0;
  for (int d = 0; d < n; ++d) {
    const uint32_t next = i / counts[d];
    off += int64_t(i - next * counts[d]) * strides[d];
    i = next;
  }
  return off;
}

// One tile: where its element (0, 0) is on each side, and how many rows (along a)
// and columns (along b) lie inside the object.
struct Tile {
  int64_t typed, packed, rows, cols;
};

// Whether element (r, c) of the tile is moved, and its stream word. Unchecked: the tile
// is whole and inside the range (most tiles), so every element is.
template <bool Checked>
__device__ __forceinline__ bool wanted(const TileArgs &a, const Tile &t, int r, int c, int64_t &word) {
  word = t.packed + r + c * a.packed_b;
  return !Checked || (r < t.rows && c < t.cols && word >= a.first && word < a.last);
}

template <int W>
using TileRow = typename WordOf<W>::type[tile_side(W) + tile_pad(W)];

// The typed side of a tile: lanes along b (the small stride), so that a warp moves a
// row of the tile in one coalesced access. Load: typed memory into the tile.
template <int W, bool Load, bool Checked>
__device__ __forceinline__ void typed_side(const TileArgs &a, const Tile &t, TileRow<W> *tile,
                                           const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  using T = typename WordOf<W>::type;
  constexpr int S = tile_side(W), R = kThreads / S, K = S / R;
  const int c = threadIdx.x % S, r0 = threadIdx.x / S;
  const int64_t column = t.typed + c * a.stride_b;
  int64_t word;
  if (Load) {
    T v[K];
    bool ok[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {  // every load issued before the first use
      ok[k] = wanted<Checked>(a, t, r0 + k * R, c, word);
      if (ok[k]) v[k] = *reinterpret_cast<const T *>(src + column + (r0 + k * R) * a.stride_a);
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (ok[k]) tile[r0 + k * R][c] = v[k];
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (wanted<Checked>(a, t, r0 + k * R, c, word))
        *reinterpret_cast<T *>(dst + column + (r0 + k * R) * a.stride_a) = tile[r0 + k * R][c];
  }
}

// The packed side of a tile: lanes along a (consecutive stream words). Load: the
// packed stream into the tile.
template <int W, bool Load, bool Checked>
__device__ __forceinline__ void packed_side(const TileArgs &a, const Tile &t, TileRow<W> *tile,
                                            const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  using T = typename WordOf<W>::type;
  constexpr int S = tile_side(W), R = kThreads / S, K = S / R;
  const int r = threadIdx.x % S, c0 = threadIdx.x / S;
  if (Load) {
    T v[K];
    bool ok[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t word;
      ok[k] = wanted<Checked>(a, t, r, c0 + k * R, word);
      if (ok[k]) v[k] = reinterpret_cast<const T *>(src)[word - a.first];
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (ok[k]) tile[r][c0 + k * R] = v[k];
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t word;
      if (wanted<Checked>(a, t, r, c0 + k * R, word)) reinterpret_cast<T *>(dst)[word - a.first] = tile[r][c0 + k * R];
    }
  }
}

// Pack reads typed rows and writes packed rows; unpack the reverse.
template <int W, bool ToPacked, bool Checked>
__device__ __forceinline__ void move_tile(const TileArgs &a, const Tile &t, TileRow<W> *tile,
                                          const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  if (ToPacked) {
    typed_side<W, true, Checked>(a, t, tile, src, nullptr);
    __syncthreads();
    packed_side<W, false, Checked>(a, t, tile, nullptr, dst);
  } else {
    packed_side<W, true, Checked>(a, t, tile, src, nullptr);
    __syncthreads();
    typed_side<W, false, Checked>(a, t, tile, nullptr, dst);
  }
  __syncthreads();  // the tile is free for the next one
}

// Grid: x over tiles along a, y over bands, z over inner batches (each looping when the
// grid is smaller).
template <int W, bool ToPacked>
__global__ void __launch_bounds__(kThreads, min_blocks(W))
    tiled(const __grid_constant__ TileArgs a, const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  constexpr int S = tile_side(W);
  __shared__ TileRow<W> tile[S];
  for (uint32_t y = blockIdx.y; y < a.bands; y += gridDim.y) {
    // (no division for a lone transpose: it is on the path to the first load)
    const uint32_t band = a.first_band + y, outer = a.nouter ? band / a.tiles_b : 0, tb = band - outer * a.tiles_b;
    const int64_t b0 = int64_t(tb) * S;
    const int64_t typed_band =
        a.start + offset_of(outer, a.nouter, a.counts + a.ninner, a.strides + a.ninner) + b0 * a.stride_b;
    const int64_t packed_band = int64_t(outer) * a.packed_outer + b0 * a.packed_b;
    const int64_t cols = min(int64_t(S), a.count_b - b0);
    for (uint32_t z = blockIdx.z; z < a.inner; z += gridDim.z) {
      const int64_t typed_batch = typed_band + offset_of(z, a.ninner, a.counts, a.strides);
      const int64_t packed_batch = packed_band + int64_t(z) * a.count_a;
      for (uint32_t x = blockIdx.x; x < a.tiles_a; x += gridDim.x) {
        const int64_t a0 = int64_t(x) * S;
        const Tile t{typed_batch + a0 * a.stride_a, packed_batch + a0, min(int64_t(S), a.count_a - a0), cols};
        if (t.rows == S && t.cols == S &&
            (a.whole || (t.packed >= a.first && t.packed + (S - 1) + (S - 1) * a.packed_b < a.last)))
          move_tile<W, ToPacked, false>(a, t, tile, src, dst);
        else
          move_tile<W, ToPacked, true>(a, t, tile, src, dst);
      }
    }
  }
}

int64_t magnitude(int64_t v) { return v < 0 ? -v : v; }

// The tile view of `s`, except the range; false where tiles do not apply or do not pay,
// or where batch and band indices would not fit the kernel's 32 bits.
bool describe(const StridedArgs &s, int word, TileArgs &t) {
  if (s.block != word || s.ndims < 2) return false;
  int j = 1;  // the dimension that swaps with dimension 0: the smallest stride above it
  for (int d = 2; d < s.ndims; ++d)
    if (magnitude(s.strides[d]) < magnitude(s.strides[j])) j = d;
  const int64_t sa = magnitude(s.strides[0]), sb = magnitude(s.strides[j]);
  if (sb == 0 || sb >= kSector || sb >= sa) return false;
  if (s.counts[0] < policy::kMinSide || s.counts[j] < policy::kMinSide) return false;
  const int64_t side = tile_side(word);
  t.start = s.start;
  t.count_a = s.counts[0];
  t.stride_a = s.strides[0];
  t.count_b = s.counts[j];
  t.stride_b = s.strides[j];
  uint64_t inner = 1, outer = 1;
  t.ninner = 0;
  for (int d = 1; d < j; ++d) {
    inner *= uint64_t(s.counts[d]);
    if (inner >= kMaxIndex32) return false;
    t.counts[t.ninner] = uint32_t(s.counts[d]);
    t.strides[t.ninner++] = s.strides[d];
  }
  t.nouter = 0;
  for (int d = j + 1; d < s.ndims; ++d) {
    outer *= uint64_t(s.counts[d]);
    if (outer >= kMaxIndex32) return false;
    t.counts[t.ninner + t.nouter] = uint32_t(s.counts[d]);
    t.strides[t.ninner + t.nouter++] = s.strides[d];
  }
  const uint64_t tiles_a = uint64_t((t.count_a + side - 1) / side), tiles_b = uint64_t((t.count_b + side - 1) / side);
  if (tiles_a >= kMaxIndex32 / 2 || tiles_b * outer >= kMaxIndex32) return false;
  t.tiles_a = uint32_t(tiles_a);
  t.tiles_b = uint32_t(tiles_b);
  t.inner = uint32_t(inner);
  t.packed_b = t.count_a * int64_t(inner);
  t.packed_outer = t.packed_b * t.count_b;
  return true;
}

// The words of the whole stream: packed_outer for each outer index.
int64_t stream_words(const TileArgs &t) {
  int64_t words = t.packed_outer;
  for (int d = t.ninner; d < t.ninner + t.nouter; ++d) words *= t.counts[d];
  return words;
}

// The band holding stream word `w`.
uint32_t band_of(const TileArgs &t, int64_t w, int side) {
  const int64_t outer = w / t.packed_outer, b = (w - outer * t.packed_outer) / t.packed_b;
  return uint32_t(outer * t.tiles_b + b / side);
}

template <int W, bool ToPacked>
void launch_w(TileArgs &t, const uint8_t *src, uint8_t *dst, cudaStream_t stream) {
  t.first_band = band_of(t, t.first, tile_side(W));
  t.bands = band_of(t, t.last - 1, tile_side(W)) - t.first_band + 1;
  const dim3 grid(t.tiles_a, t.bands < kMaxGridYZ ? t.bands : kMaxGridYZ, t.inner < kMaxGridYZ ? t.inner : kMaxGridYZ);
  tiled<W, ToPacked><<<grid, kThreads, 0, stream>>>(t, src, dst);
}

template <bool ToPacked>
void dispatch(TileArgs &t, int word, const uint8_t *src, uint8_t *dst, cudaStream_t s) {
  switch (word) {
    case 16: return launch_w<16, ToPacked>(t, src, dst, s);
    case 8: return launch_w<8, ToPacked>(t, src, dst, s);
    case 4: return launch_w<4, ToPacked>(t, src, dst, s);
    case 2: return launch_w<2, ToPacked>(t, src, dst, s);
    default: return launch_w<1, ToPacked>(t, src, dst, s);
  }
}

}  // namespace

bool tiled_transpose_fits(const StridedArgs &a, int word) {
  TileArgs t;
  return describe(a, word, t);
}

Status launch_tiled_transpose(const StridedArgs &a, int word, const void *typed, void *packed, bool to_packed,
                              cudaStream_t stream) {
  if (a.last <= a.first) return Status::Ok;
  TileArgs t;
  if (!describe(a, word, t)) return Status::Unsupported;
  t.first = a.first / word;
  t.last = a.last / word;
  t.whole = t.first == 0 && t.last == stream_words(t);
  if (to_packed)
    dispatch<true>(t, word, static_cast<const uint8_t *>(typed), static_cast<uint8_t *>(packed), stream);
  else
    dispatch<false>(t, word, static_cast<const uint8_t *>(packed), static_cast<uint8_t *>(const_cast<void *>(typed)),
                    stream);
  TEMPI_CUDA(cudaGetLastError());
  return Status::Ok;
}

}  // namespace tempi
