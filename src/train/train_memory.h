// What a single-process training run (trainer.h) allocates, by where it lives, computed before
// anything is allocated so `eth train` can refuse a run that would not fit (cli/train_args.h's
// check_train_memory). On the CPU everything is host memory. On a GPU device (emulated, cuda)
// the model state (fp32 masters, gradients, two AdamW moments, the bf16 copy), the stage's
// activation arena (sized for the device's kernel set: the fused attention saves no T x T
// tensor) and its io buffers (loss scalars, targets) are device memory, and only the batch's
// token staging and the sample list stay on the host. Figures are the allocations' own sizes
// (64-byte carving included), before the device allocator's rounding (256 bytes per allocation
// on the emulated device, the driver's granularity on cuda).
#pragma once

#include "train/trainer.h"

namespace eth {

struct TrainMemory {
  double state_bytes = 0;  // ModelState's arena
  double arena_bytes = 0;  // the stage's activation arena (or a coarse figure past any machine)
  double io_bytes = 0;     // the stage's io arena
  double host_bytes = 0;   // token staging of a micro-batch and the sample list of a batch
  bool on_device = false;  // state, arena and io live on the run's GPU device
  double device_bytes() const { return on_device ? state_bytes + arena_bytes + io_bytes : 0; }
  double total_host_bytes() const {
    return host_bytes + (on_device ? 0 : state_bytes + arena_bytes + io_bytes);
  }
};

// The allocations of Trainer(cfg) (no resume). Requires a valid run (seq_len within the model's,
// micro_batch and global_batch >= 1: ETH_CHECK); the trainer itself names bad values.
TrainMemory train_memory(const TrainConfig& cfg);

}  // namespace eth
