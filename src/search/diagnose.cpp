// Saying why nothing fits: among every template the search generated, the layout that comes
// closest to fitting memory, and the first device of it that still overflows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "search/engine.h"

namespace eth::search {

namespace {
std::string gb(double bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  s << bytes / 1e9 << " GB";
  return s.str();
}
}  // namespace

std::string explain_overflow(Context& ctx, const TemplateSet& templates) {
  if (ctx.types.empty()) {
    return "no device type of the cluster has a usable tp degree (tp must divide the model's "
           "heads and FFN size, fit in a node, be listed in --tp and be profiled)";
  }
  if (templates.size() == 0) {
    return "no pipeline template fits the cluster's devices within the limits (--tp, "
           "--max-pipelines, at most one stage per unit)";
  }
  // Smallest micro-batch size: the least activation memory any template can ask for.
  const std::int64_t mbs =
      *std::min_element(ctx.opt.micro_batch_sizes.begin(), ctx.opt.micro_batch_sizes.end());
  double best_ratio = std::numeric_limits<double>::infinity();
  int best_tpl = -1;
  MemoryFloor best;
  std::vector<StageSlot> best_slots;
  for (int id = 0; id < templates.size(); ++id) {
    const std::vector<StageSlot> slots = template_slots(ctx, templates.at(id), mbs);
    if (slots.empty()) continue;
    MemoryFloor f = least_memory_split(slots, ctx.num_units());
    if (f.worst_ratio < best_ratio) {
      best_ratio = f.worst_ratio;
      best_tpl = id;
      best = std::move(f);
      best_slots = slots;
    }
  }
  if (best_tpl < 0) {
    return "no template is profiled at micro-batch size " + std::to_string(mbs);
  }
  const PipelineTemplate& t = templates.at(best_tpl);
  std::ostringstream s;
  s << "the closest candidate, pipeline template [" << describe_template(t, ctx.types)
    << "] at micro-batch size " << mbs << " with the least-memory recompute set on every stage, ";
  for (std::size_t i = 0; i < best_slots.size(); ++i) {
    const double need = best.memory_bytes[i], cap = best_slots[i].capacity_bytes;
    if (need <= cap) continue;
    s << "still overflows stage " << i << " (device type " << best_slots[i].table->device_type
      << ", tp " << best_slots[i].table->tp << ", units " << best.bounds[i] << "-"
      << best.bounds[i + 1] - 1 << "): it needs " << gb(need) << " of its " << gb(cap)
      << " (over by " << gb(need - cap) << ")";
    return s.str();
  }
  s << "fits memory but was rejected by the search limits (packing, --max-pipelines, "
       "--v-inter, --v-intra or the enumeration limit)";
  return s.str();
}

}  // namespace eth::search
