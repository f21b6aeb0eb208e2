// Plan validation: one pass over the plan that records every broken rule with its JSON path.
// Values are checked before they are used as indices (device ids, units), so a broken plan can
// never trip an ETH_CHECK in ClusterSpec or model/arithmetic.
#include "plan/validate.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "plan/sharding.h"

namespace eth {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// "unit 5 is" / "units 5..7 are": gaps and overlaps read as sentences.
std::string units_are(std::int64_t a, std::int64_t b) {
  return a == b ? "unit " + str(a) + " is" : "units " + str(a) + ".." + str(b) + " are";
}

std::string range_text(std::int64_t a, std::int64_t b) {
  return "[" + str(a) + ", " + str(b) + "]";
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string pipeline_path(std::size_t p) { return "pipelines[" + std::to_string(p) + "]"; }
std::string stage_path(std::size_t p, std::size_t s) {
  return pipeline_path(p) + ".stages[" + std::to_string(s) + "]";
}

class Validator {
 public:
  Validator(const Plan& plan, const ClusterSpec& cluster)
      : plan_(plan), cluster_(cluster), index_(cluster) {
    for (const auto& node : cluster.nodes) {
      if (std::find(node_types_.begin(), node_types_.end(), node.device_type) == node_types_.end())
        node_types_.push_back(node.device_type);
    }
  }

  std::vector<PlanViolation> run() {
    check_plan_fields();
    for (std::size_t p = 0; p < plan_.pipelines.size(); ++p) {
      check_pipeline_fields(p);
      for (std::size_t s = 0; s < plan_.pipelines[p].stages.size(); ++s) {
        check_stage_layout(p, s);
        check_stage_devices(p, s);
        check_stage_tp(p, s);
        check_stage_recompute(p, s);
      }
      check_coverage(p);
    }
    // The shares name the gradient blocks, which exist only once every pipeline covers the
    // model: checked after every other rule holds.
    if (out_.empty()) {
      for (PlanViolation& v : sharding_violations(plan_)) add(v.path, std::move(v.message));
    }
    for (const auto& [pattern, kind] : kinds_) {
      if (kind.elided == 0) continue;
      out_.push_back(PlanViolation{
          pattern,
          std::to_string(kind.elided) + " more violation" + (kind.elided == 1 ? "" : "s") +
              " at " + pattern + " elided (the first " + std::to_string(kMaxPerKind) +
              " are listed)",
          kind.elided});
    }
    return std::move(out_);
  }

 private:
  // A plan with 10,000 broken stages has 10,000 violations of one kind (each overlap naming
  // the stages it overlaps, quadratic in all): every kind, a path with its indices replaced
  // by "*", lists its first kMaxPerKind violations and counts the rest, and messages are only
  // built for the ones listed.
  static constexpr std::int64_t kMaxPerKind = 10;
  struct Kind {
    std::int64_t listed = 0, elided = 0;
  };

  static std::string pattern_of(const std::string& path) {
    std::string out;
    for (std::size_t i = 0; i < path.size(); ++i) {
      out += path[i];
      if (path[i] != '[') continue;
      std::size_t j = i + 1;
      while (j < path.size() && path[j] >= '0' && path[j] <= '9') ++j;
      if (j > i + 1) {
        out += '*';
        i = j - 1;
      }
    }
    return out;
  }

  // Whether a violation at `path` is listed (true) or only counted (false).
  bool listed(const std::string& path) {
    const std::string pattern = pattern_of(path);
    auto it = std::find_if(kinds_.begin(), kinds_.end(),
                           [&](const auto& k) { return k.first == pattern; });
    if (it == kinds_.end()) it = kinds_.insert(kinds_.end(), {pattern, Kind{}});
    if (it->second.listed < kMaxPerKind) {
      ++it->second.listed;
      return true;
    }
    ++it->second.elided;
    return false;
  }

  void add(std::string path, std::string message) {
    if (listed(path)) out_.push_back(PlanViolation{std::move(path), std::move(message)});
  }
  template <class MakeMessage>
  void add_lazy(std::string path, MakeMessage make) {
    if (listed(path)) out_.push_back(PlanViolation{std::move(path), make(), 0});
  }
  std::int64_t last_unit() const { return plan_.model.num_units() - 1; }

  void check_plan_fields() {
    if (plan_.gbs < 1) add("gbs", "expected an integer >= 1, got " + str(plan_.gbs));
    if (!plan_.pipelines.empty()) {
      // The global batch is split exactly: sum_p B_p = GBS (DESIGN.md section 2).
      std::int64_t sum = 0;
      std::vector<std::string> terms;
      for (const auto& pipe : plan_.pipelines) {
        sum += pipe.local_batch;
        terms.push_back(str(pipe.local_batch));
      }
      if (sum != plan_.gbs) {
        const std::string how = terms.size() <= 8
                                    ? " (" + join(terms, " + ") + " = " + str(sum) + ")"
                                    : " over " + str(static_cast<std::int64_t>(terms.size())) +
                                          " pipelines (" + str(sum) + ")";
        add("gbs",
            "expected the sum of the pipelines' local_batch" + how + ", got " + str(plan_.gbs));
      }
    }
    if (plan_.seq_len < 1) {
      add("seq_len", "expected an integer >= 1, got " + str(plan_.seq_len));
    } else if (plan_.seq_len > plan_.model.seq_len) {
      add("seq_len", "expected at most the model's seq_len (" + str(plan_.model.seq_len) +
                         "), got " + str(plan_.seq_len));
    }
    if (plan_.schedule != "1f1b" && plan_.schedule != "gpipe") {
      add("schedule", "expected \"1f1b\" or \"gpipe\", got \"" + plan_.schedule + "\"");
    }
    if (plan_.pipelines.empty()) add("pipelines", "expected at least one pipeline");
  }

  void check_pipeline_fields(std::size_t p) {
    const PipelinePlan& pipe = plan_.pipelines[p];
    const std::string path = pipeline_path(p);
    if (pipe.local_batch < 1) {
      add(path + ".local_batch", "expected an integer >= 1, got " + str(pipe.local_batch));
    }
    if (pipe.micro_batch_size < 1) {
      add(path + ".micro_batch_size",
          "expected an integer >= 1, got " + str(pipe.micro_batch_size));
    } else if (pipe.local_batch >= 1 && pipe.micro_batch_size > pipe.local_batch) {
      add(path + ".micro_batch_size", "expected at most local_batch (" + str(pipe.local_batch) +
                                          "), got " + str(pipe.micro_batch_size));
    }
    if (pipe.stages.empty()) {
      add(path + ".stages",
          "expected at least one stage (the stages cover units 0.." + str(last_unit()) + ")");
    }
  }

  void check_stage_layout(std::size_t p, std::size_t s) {
    const PipelinePlan& pipe = plan_.pipelines[p];
    const StagePlan& st = pipe.stages[s];
    const std::string path = stage_path(p, s);
    if (st.tp < 1) add(path + ".tp", "expected an integer >= 1, got " + str(st.tp));
    if (st.dp < 1) {
      add(path + ".dp", "expected an integer >= 1, got " + str(st.dp));
    } else if (pipe.micro_batch_size >= 1 && st.dp > pipe.micro_batch_size) {
      // Data parallelism inside a stage splits each micro-batch across the replicas.
      add(path + ".dp",
          "expected at most the pipeline's micro_batch_size (" + str(pipe.micro_batch_size) +
              ", so every replica gets a sample of each micro-batch), got " + str(st.dp));
    }
    if (st.tp >= 1 && st.dp >= 1 && static_cast<std::int64_t>(st.devices.size()) != st.tp * st.dp) {
      add(path + ".devices", "expected tp * dp = " + str(st.tp) + " * " + str(st.dp) + " = " +
                                 str(st.tp * st.dp) + " devices, got " +
                                 str(static_cast<std::int64_t>(st.devices.size())));
    }
    if (std::find(node_types_.begin(), node_types_.end(), st.device_type) == node_types_.end()) {
      add(path + ".device_type", "unknown device type \"" + st.device_type +
                                     "\"; the cluster's nodes have: " + join(node_types_, ", "));
    }
  }

  void check_stage_devices(std::size_t p, std::size_t s) {
    const StagePlan& st = plan_.pipelines[p].stages[s];
    const std::string path = stage_path(p, s);
    const std::int64_t n = index_.num_devices();
    std::vector<std::pair<std::int64_t, std::int64_t>> node_first;  // (node, first device there)
    for (std::size_t k = 0; k < st.devices.size(); ++k) {
      const std::int64_t id = st.devices[k];
      const std::string dpath = path + ".devices[" + std::to_string(k) + "]";
      if (id < 0 || id >= n) {
        add(dpath, "device " + str(id) + " does not exist: the cluster has " + str(n) +
                       " devices (ids 0.." + str(n - 1) + ")");
        continue;
      }
      auto [it, inserted] = owner_.emplace(id, dpath);
      if (!inserted) {
        add(dpath, "device " + str(id) + " is also used by " + it->second +
                       "; a device serves at most one stage of the plan");
      }
      const std::int64_t node = index_.node_of(id);
      const std::string& type = index_.type_name_of(id);
      if (type != st.device_type) {
        add(dpath, "device " + str(id) + " (node " + str(node) + ") has type " + type +
                       ", but the stage's device_type is " + st.device_type);
      }
      bool seen = false;
      for (const auto& nf : node_first) seen = seen || nf.first == node;
      if (!seen) node_first.emplace_back(node, id);
    }
    if (node_first.size() > 1 && !st.span_nodes) {
      std::vector<std::string> where;
      for (const auto& [node, id] : node_first) {
        where.push_back("device " + str(id) + " on node " + str(node));
      }
      add(path + ".devices",
          "devices sit in " + str(static_cast<std::int64_t>(node_first.size())) + " nodes (" +
              join(where, ", ") +
              "); a stage stays in one node unless it sets \"span_nodes\": true");
    }
  }

  // Tensor parallelism shards attention by heads and the MLP by its inner size, which must
  // divide evenly (head-aligned shards); the embedding and LM head are sharded by vocabulary in
  // floor-division row ranges (model/arithmetic.h tp_rows), which need only one row per rank.
  void check_stage_tp(std::size_t p, std::size_t s) {
    const StagePlan& st = plan_.pipelines[p].stages[s];
    if (st.tp <= 1) return;
    const std::string path = stage_path(p, s) + ".tp";
    const ModelSpec& m = plan_.model;
    if (m.heads % st.tp != 0) {
      add(path,
          "expected a divisor of the model's heads (" + str(m.heads) + "), got " + str(st.tp));
    }
    if (m.kv_heads != 0 && m.kv_heads % st.tp != 0) {
      // Under grouped-query attention each tp rank holds whole key/value heads; replicating
      // them (Megatron's way for tp > kv_heads) is not implemented.
      add(path, "expected a divisor of the model's kv_heads (" + str(m.kv_heads) +
                    "), got " + str(st.tp));
    }
    if (m.ffn % st.tp != 0) {
      add(path,
          "expected a divisor of the model's ffn size (" + str(m.ffn) + "), got " + str(st.tp));
    }
    std::vector<std::string> vocab_units;
    if (st.first_unit <= 0 && st.last_unit >= 0) vocab_units.push_back("unit 0 (embedding)");
    if (st.first_unit <= last_unit() && st.last_unit >= last_unit()) {
      vocab_units.push_back("unit " + str(last_unit()) + " (LM head)");
    }
    if (!vocab_units.empty() && m.vocab < st.tp) {
      add(path, "expected at most the model's vocab (" + str(m.vocab) +
                    "), since the stage holds " + join(vocab_units, " and ") +
                    ", sharded by vocabulary (one row per rank at least); got " + str(st.tp));
    }
  }

  void check_stage_recompute(std::size_t p, std::size_t s) {
    const RecomputeSet& rc = plan_.pipelines[p].stages[s].recompute;
    const std::string path = stage_path(p, s) + ".recompute";
    const unsigned unknown = static_cast<unsigned>(rc.bits()) >> kNumRecomputeOps;
    if (unknown != 0) {
      add(path, "holds operator bits beyond the known operators (" + recompute_op_names() + ")");
    }
    if (rc.full_unit() && rc.ops().size() > 1) {
      std::vector<std::string> others;
      for (const auto& name : rc.names()) {
        if (name != recompute_op_name(RecomputeOp::Unit)) others.push_back(name);
      }
      add(path, "\"unit\" already recomputes the whole unit, so " + join(others, ", ") +
                    (others.size() == 1 ? " is" : " are") +
                    " redundant; list \"unit\" alone or only operators");
    }
  }

  // Every pipeline covers units 0..L+1 exactly once with stages in unit order (DESIGN.md
  // section 2). Each range is checked alone, then the valid ones are walked in unit order so a
  // gap or an overlap is reported once, with the unit numbers and the stages involved.
  void check_coverage(std::size_t p) {
    const auto& stages = plan_.pipelines[p].stages;
    const std::int64_t last = last_unit();
    struct Range {
      std::int64_t first, last;
      std::size_t index;
    };
    std::vector<Range> ranges;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const StagePlan& st = stages[s];
      const std::string path = stage_path(p, s) + ".units";
      if (st.first_unit < 0 || st.last_unit < 0) {
        add(path, "expected unit indices >= 0, got " + range_text(st.first_unit, st.last_unit));
        continue;
      }
      if (st.first_unit > st.last_unit) {
        add(path, "expected first <= last, got " + range_text(st.first_unit, st.last_unit));
        continue;
      }
      if (st.last_unit > last) {
        add(path, "unit " + str(st.last_unit) + " does not exist: model " + plan_.model.name +
                      " has units 0.." + str(last) + " (embedding, " + str(plan_.model.layers) +
                      " blocks, LM head)");
        if (st.first_unit > last) continue;
      }
      ranges.push_back(Range{st.first_unit, std::min(st.last_unit, last), s});
    }
    for (std::size_t k = 1; k < ranges.size(); ++k) {
      if (ranges[k].first < ranges[k - 1].first) {
        add(stage_path(p, ranges[k].index) + ".units",
            "stages must follow unit order: stages[" + std::to_string(ranges[k].index) +
                "] starts at unit " + str(ranges[k].first) + ", before stages[" +
                std::to_string(ranges[k - 1].index) + "], which starts at unit " +
                str(ranges[k - 1].first));
      }
    }
    std::stable_sort(ranges.begin(), ranges.end(),
                     [](const Range& a, const Range& b) { return a.first < b.first; });
    std::int64_t covered_end = 0;  // units [0, covered_end) belong to some stage seen so far
    std::size_t end_stage = 0;     // the stage that holds unit covered_end - 1
    for (std::size_t k = 0; k < ranges.size(); ++k) {
      const Range& r = ranges[k];
      const std::string path = stage_path(p, r.index) + ".units";
      if (r.first > covered_end) {
        std::string why = k == 0 ? "the first stage must start at unit 0"
                                 : "stages[" + std::to_string(end_stage) + "] ends at unit " +
                                       str(covered_end - 1) + " and stages[" +
                                       std::to_string(r.index) + "] starts at unit " + str(r.first);
        add(path, units_are(covered_end, r.first - 1) + " covered by no stage: " + why);
      } else if (r.first < covered_end) {
        const std::int64_t o_last = std::min(r.last, covered_end - 1);
        add_lazy(path, [&] {
          std::vector<std::string> holders;
          for (std::size_t j = 0; j < k; ++j) {
            if (ranges[j].last >= r.first && ranges[j].first <= o_last) {
              if (holders.size() == 3) {
                holders.push_back("others");
                break;
              }
              holders.push_back("stages[" + std::to_string(ranges[j].index) + "] " +
                                range_text(ranges[j].first, ranges[j].last));
            }
          }
          return units_are(r.first, o_last) + " also in " + join(holders, " and ") +
                 "; every unit belongs to exactly one stage";
        });
      }
      if (r.last + 1 > covered_end) {
        covered_end = r.last + 1;
        end_stage = r.index;
      }
    }
    if (!ranges.empty() && covered_end <= last) {
      add(stage_path(p, end_stage) + ".units",
          units_are(covered_end, last) + " covered by no stage: the last stage must end at unit " +
              str(last) + " (the LM head)");
    }
  }

  const Plan& plan_;
  const ClusterSpec& cluster_;
  const ClusterIndex index_;
  std::vector<std::string> node_types_;        // distinct device types of the nodes
  std::map<std::int64_t, std::string> owner_;  // device id -> path of its first use
  std::vector<PlanViolation> out_;
  std::vector<std::pair<std::string, Kind>> kinds_;  // in order of first appearance
};

}  // namespace

std::vector<PlanViolation> validate_plan(const Plan& plan, const ClusterSpec& cluster) {
  return Validator(plan, cluster).run();
}

void check_plan(const Plan& plan, const ClusterSpec& cluster, const std::string& source) {
  std::vector<PlanViolation> violations = validate_plan(plan, cluster);
  if (violations.empty()) return;
  std::vector<InputError> errors;
  errors.reserve(violations.size());
  for (const auto& v : violations) errors.emplace_back("plan", source, v.path, v.message);
  throw InputErrors(errors);
}

}  // namespace eth
