// Work on the application's streams (app_streams.hpp). The moves run on the stream's own
// device with their descriptions in the launch's parameter (kernels.hpp, ParameterOnly);
// the words are written and waited for by the driver's batched stream memory operations,
// one call for all the words of an enqueue call (a halo exchange's 26 flags cost one
// operation on the stream, not 26).
#include "app_streams.hpp"

#include <cuda.h>

#include <algorithm>

#include "batches.hpp"
#include "check.hpp"
#include "kernels.hpp"
#include "log.hpp"
#include "pointers.hpp"

namespace tempi {

namespace {

using BatchMemOpFn = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);
BatchMemOpFn batch_mem_op_fn() {
  static const auto fn = reinterpret_cast<BatchMemOpFn>(driver_entry("cuStreamBatchMemOp"));
  return fn;
}

// The driver takes at most this many operations a call (CUDA's documented limit).
constexpr size_t kMaxBatch = 256;

// Whether the current device addresses memory as the host does (unified addressing: every
// 64-bit Linux system CUDA supports). Then the words' pinned memory (cudaHostAlloc, mapped)
// has the same address on both sides, and no query is needed: cudaHostGetDevicePointer
// costs about a microsecond, 130 of them per halo exchange of 52 operations.
bool unified_addressing() {
  static const bool unified = [] {
    int dev = 0, on = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&on, cudaDevAttrUnifiedAddressing, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return on != 0;
  }();
  return unified;
}

// The device address of a word of mapped pinned host memory.
Status device_address(uint32_t *word, CUdeviceptr &out) {
  if (unified_addressing()) {
    out = reinterpret_cast<CUdeviceptr>(word);
    return Status::Ok;
  }
  void *dev = nullptr;
  TEMPI_CUDA(cudaHostGetDevicePointer(&dev, word, 0));
  out = reinterpret_cast<CUdeviceptr>(dev);
  return Status::Ok;
}

Status batch(cudaStream_t stream, const std::vector<uint32_t *> &words, uint32_t value, bool write) {
  const BatchMemOpFn fn = batch_mem_op_fn();
  if (!fn) {
    TEMPI_LOG(Error, "enqueue: this CUDA driver has no stream memory operations (cuStreamBatchMemOp)");
    return Status::Unsupported;
  }
  std::vector<CUstreamBatchMemOpParams> ops;
  for (size_t at = 0; at < words.size(); at += kMaxBatch) {
    const size_t n = std::min(kMaxBatch, words.size() - at);
    ops.assign(n, CUstreamBatchMemOpParams{});
    for (size_t k = 0; k < n; ++k) {
      CUdeviceptr address = 0;
      TEMPI_TRY(device_address(words[at + k], address));
      if (write) {
        ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        ops[k].writeValue.address = address;
        ops[k].writeValue.value = value;
        ops[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;  // after the earlier work's writes
      } else {
        ops[k].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        ops[k].waitValue.address = address;
        ops[k].waitValue.value = value;
        ops[k].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
      }
    }
    const CUresult r = fn(reinterpret_cast<CUstream>(stream), unsigned(n), ops.data(), 0);
    if (r != CUDA_SUCCESS) {
      TEMPI_LOG(Error, "enqueue: cuStreamBatchMemOp (%s %zu words) failed with CUDA driver error %d",
                write ? "write" : "wait", n, int(r));
      return Status::GpuError;
    }
  }
  return Status::Ok;
}

}  // namespace

int app_stream_device(cudaStream_t stream) {
  int device = -1;
  if (cudaStreamGetDevice(stream, &device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

Status app_stream_capturing(cudaStream_t stream, bool &capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TEMPI_CUDA(cudaStreamIsCapturing(stream, &status));
  capturing = status != cudaStreamCaptureStatusNone;
  return Status::Ok;
}

Status app_stream_moves(Backend &b, cudaStream_t stream, const std::vector<MoveJob> &jobs, bool to_packed) {
  if (jobs.empty()) return Status::Ok;
  const OnDevice on_its_gpu(app_stream_device(stream));
  const ParameterOnly no_tables;
  return issue_moves_on(b, jobs, to_packed, stream);
}

Status app_stream_write(cudaStream_t stream, const std::vector<uint32_t *> &words, uint32_t value) {
  if (words.empty()) return Status::Ok;
  const OnDevice on_its_gpu(app_stream_device(stream));
  return batch(stream, words, value, true);
}

Status app_stream_wait(cudaStream_t stream, const std::vector<uint32_t *> &words, uint32_t value) {
  if (words.empty()) return Status::Ok;
  const OnDevice on_its_gpu(app_stream_device(stream));
  return batch(stream, words, value, false);
}

}  // namespace tempi
