// StageCompute and the model state on the host-emulated GPU: GpuKernels<EmulatedApi>, the same
// template code as the CUDA instantiation (stage_compute_gpu.cpp), run in CI on any machine
// (`eth train --device emulated`, tests/train/emulated_train_test.cpp).
#include "kernels/emulated/api.h"
#include "train/gpu_kernels.h"
#include "train/stage_compute_impl.h"
#include "train/state_backend.h"

namespace eth {

static_assert(KernelSet<GpuKernels<EmulatedApi>>);
static_assert(TrainingKernelSet<GpuKernels<EmulatedApi>>);

template class StageCompute<GpuKernels<EmulatedApi>>;
template class StateBackendOf<GpuKernels<EmulatedApi>>;
template std::unique_ptr<StateBackend> make_state_backend<GpuKernels<EmulatedApi>>(Precision,
                                                                                   std::size_t);

}  // namespace eth
