// Starting a run from a checkpoint's weights (eth train --init-from, issue 26): fine-tuning a
// converted Hugging Face model or continuing from another run with this run's own data, seed and
// schedule. Unlike a resume, only the parameters are taken: the AdamW moments start at zero and
// the run starts at step 0, so nothing of the checkpoint's optimizer, data position or schedule
// carries over. Files are plan-independent (train/checkpoint.h), so any stage of any plan loads
// just its units (tp shards included) from the same file.
#pragma once

#include <filesystem>

#include "model/model_spec.h"
#include "train/checkpoint.h"
#include "train/model_state.h"

namespace eth {

// The model a checkpoint holds (its metadata); InputError("checkpoint", path, ...) for a file
// that is not an ETH checkpoint.
ModelSpec checkpoint_model(const std::filesystem::path& path);

// Throws InputError naming `path` and the first field of __metadata__.model where `have` (the
// checkpoint's) differs from `want` (the run's) in a dimension; the name may differ (a converted
// checkpoint is named after its Hugging Face folder, a model file after itself).
void check_init_model(const std::filesystem::path& path, const ModelSpec& have,
                      const ModelSpec& want);

// Loads the parameters of the units `state` holds from `path` (checked as load_checkpoint
// checks them, after check_init_model against state.model()), then zeroes the AdamW moments.
// The bf16 compute copy is refreshed by the load.
void init_from_checkpoint(const std::filesystem::path& path, ModelState& state);

// InputError("cli", "--init-from", ...) when a run both resumes and starts from a checkpoint's
// weights: a resume continues a run, --init-from starts a new one.
void check_init_not_resume(const std::filesystem::path& init_from, bool resuming);

}  // namespace eth
