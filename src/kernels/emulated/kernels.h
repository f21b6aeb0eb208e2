// The emulated device's kernels: every function of cuda/kernels.h, with the same names, the same
// signatures and the CUDA set's semantics, on device memory of the emulated device (runtime.h).
// Each runs on the calling thread inside a DeviceScope and returns when done. They are the CPU
// bf16 kernels (cpu/bf16/, cpu/) wherever those have the CUDA kernel's contract, so their
// results are those kernels' bit for bit; what the GPU does differently is done here the GPU's
// way:
//   - attention is fused (attention.cpp): online softmax over key blocks, no T x T tensor, the
//     output and lse saved, P recomputed in backward, dropout of P drawn from philox.h inside;
//   - dropout masks, AdamW, the sum of squares and the bf16 refresh take device pointers;
//   - crossentropy_forward / vocab_ce_finish write the loss to a host double, as the CUDA
//     set's do (synchronous there too); the _add forms add into a device scalar instead.
// Every device pointer argument is checked to be device memory (EmuError otherwise): a host
// buffer handed to a kernel would be a crash on a GPU. `rows` (GradRows) and `loss` are host
// memory, as in the CUDA set (except the _add forms' device `loss`); the pointers inside `rows`
// are checked.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/grad_rows.h"
#include "kernels/rng.h"

namespace eth::emu {

// Dropout of the attention probabilities inside the fused kernels: cuda::AttnDropout itself (the
// same type, so the two kernel sets' attention signatures are identical).
using AttnDropout = cuda::AttnDropout;

#include "kernels/device_kernels.inc"  // every kernel's declaration, as cuda/kernels.h's

}  // namespace eth::emu
