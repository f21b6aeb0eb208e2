// The planner's flags (cli/planner_args.h) parsed in-process: each flag lands in its field and
// in PlannerOptions (the --no-* flags inverted), out-of-range values are refused naming the flag,
// --method is optional per command, and the profile choice refuses --profile with --analytic and
// a --tp list that does not divide the model's heads.
#include "cli/planner_args.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "plan/sharding.h"
#include "test_util.h"

namespace eth::planner_args_test {
namespace {

using cli::PlannerArgs;

PlannerArgs parse(const std::string& line, bool with_method = true) {
  CLI::App app;
  PlannerArgs a;
  cli::add_planner_options(&app, a, with_method);
  app.parse(line, false);
  return a;
}

// The message of the parse error `line` gives, or "(no error)".
std::string parse_error(const std::string& line, bool with_method = true) {
  try {
    parse(line, with_method);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PlannerArgs, DefaultsAreThePlannersOwn) {
  const PlannerArgs a = parse("");
  const PlannerOptions o = cli::planner_options(a);
  const PlannerOptions d;  // the library's defaults
  EXPECT_EQ(o.micro_batch_sizes, d.micro_batch_sizes);
  EXPECT_EQ(o.tp, d.tp);
  EXPECT_EQ(o.max_pipelines, d.max_pipelines);
  EXPECT_EQ(o.top_k, d.top_k);
  EXPECT_EQ(o.max_partitions, d.max_partitions);
  EXPECT_EQ(o.alpha, d.alpha);
  EXPECT_TRUE(o.cpc && o.ses && o.oso && o.dpo);
  EXPECT_FALSE(o.v_inter.has_value());
  EXPECT_EQ(cli::planner_method(a), PlanMethod::Eth);
}

TEST(PlannerArgs, EachFlagLandsInItsOption) {
  const PlannerArgs a = parse(
      "--method layer --micro-batch-sizes 2,8 --tp 1,4 --max-pipelines 3 --alpha 0.25 "
      "--v-inter 0.5 --v-intra 2 --no-cpc --no-ses --no-oso --no-dpo --max-partitions 77 "
      "--top-k 5 --layer-operator-recompute --optimizer-sharding memory --profile prof");
  EXPECT_EQ(a.profile, "prof");
  const PlannerOptions o = cli::planner_options(a);
  EXPECT_EQ(o.micro_batch_sizes, (std::vector<std::int64_t>{2, 8}));
  EXPECT_EQ(o.tp, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(o.max_pipelines, 3);
  EXPECT_DOUBLE_EQ(o.alpha, 0.25);
  EXPECT_EQ(o.v_inter, 0.5);
  EXPECT_EQ(o.v_intra, 2.0);
  EXPECT_FALSE(o.cpc || o.ses || o.oso || o.dpo);
  EXPECT_EQ(o.max_partitions, 77);
  EXPECT_EQ(o.top_k, 5);
  EXPECT_TRUE(o.layer_operator_recompute);
  EXPECT_EQ(o.optimizer_sharding, *parse_optimizer_sharding("memory"));
  EXPECT_EQ(cli::planner_method(a), PlanMethod::Layer);
  EXPECT_EQ(cli::planner_method(parse("--method uniform")), PlanMethod::Uniform);
}

TEST(PlannerArgs, OutOfRangeValuesAreRefusedNamingTheFlag) {
  for (const std::string flag : {"--micro-batch-sizes 0", "--tp 2,0", "--alpha 1", "--alpha -0.1",
                                  "--top-k 0", "--max-partitions 0", "--max-pipelines -1",
                                  "--v-inter -1", "--method fastest", "--optimizer-sharding half",
                                  "--tp two"}) {
    const std::string e = parse_error(flag);
    EXPECT_NE(e, "(no error)") << flag;
    EXPECT_NE(e.find(flag.substr(0, flag.find(' '))), std::string::npos) << flag << ": " << e;
  }
  // eth compare runs every method: no --method there.
  EXPECT_NE(parse_error("--method eth", false), "(no error)");
  EXPECT_EQ(parse_error("--tp 8", false), "(no error)");
}

TEST(PlannerArgs, UnknownMethodSetDirectlyIsAUsageError) {
  PlannerArgs a;
  a.method = "fastest";
  EXPECT_THROW(cli::planner_method(a), cli::UsageError);
}

TEST(PlannerArgs, ProfileChoice) {
  const ModelSpec tiny = model_preset("tiny");  // 4 heads
  const ClusterSpec cluster = load_cluster("cpu-emulated");
  PlannerArgs a;
  a.tps = {1, 3};  // 3 does not divide 4 heads: priced at tp 1 only
  a.mbss = {1, 2};
  const cli::PlannerProfile p = cli::planner_profile(a, tiny, cluster, 16);
  EXPECT_EQ(p.source, "analytic");
  EXPECT_FALSE(p.db.entries().empty());
  for (const auto& [key, e] : p.db.entries()) EXPECT_EQ(e.seq_len, 16);
  a.tps = {3};
  const std::string e = test::error_of([&] { cli::planner_profile(a, tiny, cluster, 16); });
  EXPECT_NE(e.find("--tp"), std::string::npos) << e;
  a.profile = "some-dir";
  a.analytic = true;
  EXPECT_THROW(cli::planner_profile(a, tiny, cluster, 16), cli::UsageError);
}

}  // namespace
}  // namespace eth::planner_args_test
