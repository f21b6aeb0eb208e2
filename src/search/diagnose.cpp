// Saying why nothing fits: among every template the search generated, the layout that comes
// closest to fitting memory, and the first device of it that still overflows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/format.h"
#include "search/engine.h"

namespace eth::search {


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
      << best.bounds[i + 1] - 1 << "): it needs " << fmt_bytes(need) << " of its "
      << fmt_bytes(cap) << " (over by " << fmt_bytes(need - cap) << ")";
    return s.str();
  }
  ctx.limits_not_memory = true;
  s << "fits memory but was rejected by the search limits: " << limits_that_bound(ctx);
  return s.str();
}

std::string limits_that_bound(const Context& ctx) {
  const SearchStats& st = ctx.stats;
  auto count = [](const std::map<std::string, std::int64_t>& m, const char* key) {
    const auto it = m.find(key);
    return it == m.end() ? std::int64_t{0} : it->second;
  };
  std::vector<std::string> why;
  if (const auto n = count(st.skipped, "max_pipelines"); n > 0) {
    why.push_back(std::to_string(n) + " partitions need more than " +
                  std::to_string(ctx.max_pipelines()) +
                  " pipelines (every pipeline takes at least one sample of the global batch of " +
                  std::to_string(ctx.gbs) +
                  (ctx.opt.max_pipelines > 0 ? ", and --max-pipelines " +
                                                   std::to_string(ctx.opt.max_pipelines)
                                             : std::string()) +
                  "): a larger --gbs, or larger --tp and more stages per pipeline");
  }
  if (const auto n = count(st.skipped, "packing"); n > 0) {
    why.push_back(std::to_string(n) + " partitions do not pack onto the nodes (a stage's tp "
                                      "devices sit in one node)");
  }
  if (const auto n = count(st.skipped, "v_inter"); n > 0) {
    why.push_back(std::to_string(n) + " partitions exceed --v-inter");
  }
  if (const auto n = count(st.rejected_options, "v_intra"); n > 0) {
    why.push_back(std::to_string(n) + " template options exceed --v-intra");
  }
  if (const auto n = count(st.rejected_options, "enumeration_limit"); n > 0) {
    why.push_back(std::to_string(n) + " templates have more unit splits than the enumeration "
                                      "limit (--no-dpo)");
  }
  if (const auto n = count(st.limits, "max_partitions"); n > 0) {
    why.push_back("the search stopped after " + std::to_string(n) +
                  " partitions (--max-partitions)");
  }
  if (why.empty()) return "none recorded";
  std::string out;
  for (std::size_t i = 0; i < why.size(); ++i) out += (i ? "; " : "") + why[i];
  return out;
}

}  // namespace eth::search
