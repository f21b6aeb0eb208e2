// The CUDA kernels of bf16 mixed-precision training: the kernel set of cpu/bf16/ (same
// signatures, same element types, same accumulation conventions: kernels/README.md) on device
// pointers, plus what the GPU does differently:
//   - attention is one fused, memory-efficient kernel pair (attention_forward/backward): scores
//     and probabilities live in registers and shared memory only (online softmax), the forward
//     saves the output and the per-row log-sum-exp, and the backward recomputes P from them;
//     dropout of P draws its mask inside the kernels from the CPU's Philox keys (philox.h);
//   - dropout masks are drawn on the device (dropout_mask_fill), bit for bit rng.h's;
//   - the optimizer's AdamW and the gradient sum of squares run on the device.
// Every function queues work on the calling thread's stream (runtime.h) and returns without
// waiting, except where it returns a host value (the host-pointer losses, sum_squares). The
// trainer uses the device-scalar forms of the losses (crossentropy_forward_add,
// vocab_ce_finish_add: queued, no wait), so a step reads its loss once. A plain C++ header;
// the definitions are the .cu files of this folder (no_cuda.cpp without CUDA).
// Token ids are not checked on the device (the data loader validated them).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/grad_rows.h"
#include "kernels/rng.h"

namespace eth::cuda {

// Dropout of the attention probabilities inside the fused kernels: element (b, h, t, t2) of
// the micro-batch is element (head0 + h) T T + t T + t2 of global sample sample0 + b in
// `stream` (StageCompute's attn_dropout key), kept iff philox.h's rule keeps it. p = 0: none.
struct AttnDropout {
  RngStream stream;
  float p = 0;
  std::int64_t sample0 = 0;
  std::int64_t head0 = 0;  // the tp rank's first head
};

#include "kernels/device_kernels.inc"  // every kernel's declaration

}  // namespace eth::cuda
