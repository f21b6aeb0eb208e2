// Initialization from a checkpoint's weights. See init_from.h.
#include "train/init_from.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "train/state_backend.h"

namespace eth {

ModelSpec checkpoint_model(const std::filesystem::path& path) {
  return read_checkpoint_meta(path).model;
}

void check_init_model(const std::filesystem::path& path, const ModelSpec& have,
                      const ModelSpec& want) {
  const std::pair<const char*, std::int64_t ModelSpec::*> dims[] = {
      {"layers", &ModelSpec::layers}, {"hidden", &ModelSpec::hidden},
      {"heads", &ModelSpec::heads},   {"seq_len", &ModelSpec::seq_len},
      {"vocab", &ModelSpec::vocab},   {"ffn", &ModelSpec::ffn}};
  for (const auto& [field, member] : dims) {
    if (have.*member != want.*member) {
      throw InputError("checkpoint", path.string(), std::string("__metadata__.model.") + field,
                       "the checkpoint's model " + have.name + " has " + field + " " +
                           std::to_string(have.*member) + " but this run trains " + want.name +
                           " with " + std::to_string(want.*member) +
                           " (leave --model out to train the checkpoint's model)");
    }
  }
}

void init_from_checkpoint(const std::filesystem::path& path, ModelState& state) {
  check_init_model(path, checkpoint_model(path), state.model());
  load_checkpoint(path, state);
  // A fresh optimizer: the checkpoint's moments (zero in a converted one, a trained run's
  // otherwise) belong to its own schedule.
  state.backend().zero(state.adam_m(), state.numel());
  state.backend().zero(state.adam_v(), state.numel());
}

void check_init_not_resume(const std::filesystem::path& init_from, bool resuming) {
  if (resuming && !init_from.empty()) {
    throw InputError("cli", "--init-from", "",
                     "not with --resume: --resume continues a run (its optimizer state and "
                     "step), --init-from starts a new one from a checkpoint's weights");
  }
}

}  // namespace eth
