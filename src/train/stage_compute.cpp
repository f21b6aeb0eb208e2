// StageCompute on the CPU kernel sets: fp32 and bf16 (training) and the double-precision
// reference (the whole-model finite-difference test). The definitions are
// stage_compute_impl.h; GpuKernels<CudaApi> is instantiated apart (stage_compute_gpu.cpp).
#include "train/stage_compute_impl.h"

#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"

namespace eth {

static_assert(KernelSet<CpuKernels>);
static_assert(KernelSet<CpuBf16Kernels>);
static_assert(KernelSet<RefKernels<double>>);

template class StageCompute<CpuKernels>;
template class StageCompute<CpuBf16Kernels>;
template class StageCompute<RefKernels<double>>;

}  // namespace eth
