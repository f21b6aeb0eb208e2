// StageCompute and the model state on the CUDA kernels: GpuKernels<CudaApi>, compiled in every
// build so the GPU trainer's code is type-checked everywhere; in a build without CUDA the
// kernels and memory functions are kernels/cuda/no_cuda.cpp's, which throw CudaError at run time
// (the device is refused before any of this runs).
#include "kernels/cuda/api.h"
#include "train/gpu_kernels.h"
#include "train/stage_compute_impl.h"
#include "train/state_backend.h"

namespace eth {

static_assert(KernelSet<GpuKernels<CudaApi>>);
static_assert(TrainingKernelSet<GpuKernels<CudaApi>>);

template class StageCompute<GpuKernels<CudaApi>>;
template class StateBackendOf<GpuKernels<CudaApi>>;
template std::unique_ptr<StateBackend> make_state_backend<GpuKernels<CudaApi>>(Precision,
                                                                               std::size_t);

}  // namespace eth
