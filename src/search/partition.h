// The planner's search space: pipeline templates (ordered groups of stages, each group one device
// type and tp degree), cluster partitions (templates with repeat counts that together use the
// cluster's devices), and packing a partition's stages onto real devices, node by node.
// docs/planner.md defines the families generated here. No costs: see search/planner.cpp.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "search/data_balance.h"

namespace eth::search {

// One device type of the cluster as the planner sees it.
struct TypeInfo {
  std::string name;
  std::int64_t devices = 0;
  std::vector<std::int64_t> nodes;  // indices into ClusterSpec::nodes, ascending
  std::int64_t max_node_devices = 0;
  double capacity_bytes = 0;
  double intra_bytes_per_s = 0;   // between two devices of one node
  double inter_bytes_per_s = 0;   // leaving the node
  std::vector<std::int64_t> tps;  // tp degrees the planner may give a stage of this type
};
// Every type some node uses, in name order (tps left empty for the caller to fill).
std::vector<TypeInfo> cluster_types(const ClusterSpec& cluster);

// `count` consecutive stages of one type, each with `tp` devices.
struct StageGroup {
  int type = 0;  // index into the TypeInfo list
  std::int64_t tp = 1;
  std::int64_t count = 1;
  auto operator<=>(const StageGroup&) const = default;
};

struct PipelineTemplate {
  std::vector<StageGroup> groups;  // in pipeline order
  std::int64_t num_stages() const;
  std::int64_t devices_of(int type) const;
  auto operator<=>(const PipelineTemplate&) const = default;
};
// "4x910B2/tp2 + 2x910B4"
std::string describe_template(const PipelineTemplate& t, const std::vector<TypeInfo>& types);

// Interned templates: equal templates get one id (and so one cache entry).
class TemplateSet {
 public:
  int intern(const PipelineTemplate& t);
  const PipelineTemplate& at(int id) const { return list_[static_cast<std::size_t>(id)]; }
  int size() const { return static_cast<int>(list_.size()); }

 private:
  std::map<PipelineTemplate, int> ids_;
  std::vector<PipelineTemplate> list_;
};

enum class Family : std::uint8_t { Pure, Mixed, Layer };
std::string_view family_name(Family f);

struct PartitionPart {
  int tpl = 0;
  std::int64_t count = 1;  // identical pipelines of this template
};

struct Partition {
  Family family = Family::Pure;
  std::vector<PartitionPart> parts;
  std::vector<std::int64_t> idle;  // per type: devices left unused
  std::int64_t num_pipelines() const;
  std::int64_t num_idle() const;
};

struct GenerateOptions {
  std::int64_t num_units = 0;
  std::int64_t max_pipelines = 0;  // the most pipelines a partition may have (>= 1)
  bool allow_idle = false;         // inexact covers: devices of a type may stay unused
  bool mixed = true;               // false: the pure family only
  // With allow_idle: covers that leave no device idle are neither appended nor counted (the
  // exact round tried them), so they use none of the budget.
  bool skip_busy = false;
  // When set, a partition with a template for which `usable` says false is counted in
  // `*unusable` instead of appended (the search applies its memory floor while generating, so
  // partitions that could never fit are not built). They are counted, not enumerated: a
  // product over types can hold far more of them than can be visited.
  std::function<bool(int)> usable;
  std::int64_t* unusable = nullptr;
  // Streaming: once `out` holds flush_at partitions, flush(out) takes them (and clears out), so
  // the partitions held at once stay bounded whatever the space's size.
  std::size_t flush_at = 0;
  std::function<void(std::vector<Partition>&)> flush;
  // The most partitions appended in all (0: no limit). On reaching it generation stops and
  // *stopped is set: the space was not searched to its end.
  std::int64_t budget = 0;
  std::int64_t* appended = nullptr;
  bool* stopped = nullptr;
  // Bounds while generating (the search's SES, docs/planner.md "Scale"): when `threshold` is
  // set and returns a finite value, a sub-product of pure options none of whose completions
  // can take the global batch within it (each template's lower-bound options from
  // `bound_options`, each pipeline at least one sample) is counted in *pruned, not built. Such
  // partitions have a bound above the threshold, which only falls as the search goes on, so
  // the search would skip every one of them. Bounds may tighten between calls (never loosen).
  std::function<double()> threshold;
  std::function<const std::vector<MicroBatchOption>&(int)> bound_options;
  // Optional: every template whose bound_options may have tightened, once per tightening, in
  // order (only ever appended to), so the samples worked out from a template's bound are
  // redone only when it appears there. Without it they are kept while the threshold stays (as
  // valid, only looser than the tightened bounds would give).
  const std::vector<int>* bound_log = nullptr;
  // Optional: tightens bound_options(tpl) where it matters at the threshold `tau` (the size
  // that lets a pipeline take the most samples within it, towards taking fewer than `need`);
  // false when that is already exact. Called for a mixed template before the products over it
  // are generated, while its bound alone does not prune them: the template is shared by every
  // partition of those products.
  std::function<bool(int tpl, double tau, std::int64_t need)> tighten;
  // Optional: makes sure bound_options(tpl) is empty when no size of tpl fits at all, so its
  // partitions prune before there is a threshold (called only then).
  std::function<void(int tpl)> probe;
  // Optional (with `usable`): lower bounds shared by every order of a layer template's groups
  // (never above bound_options of any order; empty when no order passes the memory floor), so
  // the layer family prunes or drops all orders of a shape before interning any.
  std::function<const std::vector<MicroBatchOption>&(const PipelineTemplate&)> order_free;
  std::int64_t gbs = 0;
  std::int64_t* pruned = nullptr;
};

// Appends the pure and (unless opt.mixed is false) mixed families (docs/planner.md) to `out`;
// returns the number of partitions dropped for having more than max_pipelines pipelines.
std::int64_t generate_partitions(const std::vector<TypeInfo>& types, const GenerateOptions& opt,
                                 TemplateSet& templates, std::vector<Partition>& out);
// The layer family: one template holding every type (one group per type, in every order of the
// types; types by capacity descending only when more than four), repeated to use every device.
std::int64_t layer_partitions(const std::vector<TypeInfo>& types, const GenerateOptions& opt,
                              TemplateSet& templates, std::vector<Partition>& out);

// Whether pack_devices would succeed, without building the assignment: first fit places
// stages of equal tp node after node, so counts suffice. `scratch` is reused between calls.
bool pack_feasible(const ClusterSpec& cluster, const std::vector<TypeInfo>& types,
                   const TemplateSet& templates, const Partition& partition,
                   std::vector<std::int64_t>& scratch);

// Global device ids per pipeline (parts expanded in order, `count` pipelines each), per stage,
// tp ids each; empty when first-fit packing fails. Stages are placed in decreasing tp order
// (stable), each into the first node of its type with enough free devices, taking that node's
// lowest free devices.
std::vector<std::vector<std::vector<std::int64_t>>> pack_devices(const ClusterSpec& cluster,
                                                                 const std::vector<TypeInfo>& types,
                                                                 const TemplateSet& templates,
                                                                 const Partition& partition);

}  // namespace eth::search
