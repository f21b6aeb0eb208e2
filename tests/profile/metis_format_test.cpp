// Metis's formats: what ETH writes reads back equal; a hand-made file with a missing field is
// refused by name; the peer run's inputs (bench/data/metis-inputs, ETH_METIS_INPUTS_DIR) read,
// with parameter and activation counts that match the model's formulas.
#include "profile/metis_format.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "model/arithmetic.h"
#include "profile/analytic.h"
#include "profile/test_dir.h"

namespace eth {
namespace {

const std::filesystem::path kPeers = ETH_METIS_INPUTS_DIR;

ClusterSpec three_type_cluster() {
  ClusterSpec c;
  for (const char* name : {"A100", "910B2"}) {
    c.nodes.push_back({name, 8});
    c.device_types[name] = *find_device_type_preset(name);
  }
  DeviceType x{"X1", 150, 40, 600, std::nullopt, 1.0};
  c.nodes.push_back({"X1", 4});
  c.device_types["X1"] = x;
  c.custom_types.push_back("X1");
  return c;
}

// What reading back must give: the same entries, now saying they came from Metis's files.
std::map<ProfileKey, ProfileEntry> as_metis(const ProfileDb& db) {
  auto out = db.entries();
  for (auto& [k, e] : out) e.source = "metis";
  return out;
}

TEST(MetisFormatTest, RoundTripIsEqual) {
  test::TempDir dir;
  const ModelSpec m = model_preset("gpt3-350m");
  const ClusterSpec c = three_type_cluster();
  const ProfileDb db = analytic_profile_db(m, c, {1, 2, 4}, {1, 2, 4, 16}, m.seq_len);
  EXPECT_EQ(write_metis_profile_dir(db, dir.path()), 3u * 3u * 4u);
  // Metis spells 910B2 as B2.
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "DeviceType.B2_tp4_bs16.json"));
  EXPECT_TRUE(is_metis_profile_dir(dir.path()));
  // X1 is no preset: its figures come from the cluster.
  EXPECT_THROW(read_metis_profile_dir(dir.path(), m), InputError);
  const ProfileDb back = read_metis_profile_dir(dir.path(), m, &c);
  EXPECT_EQ(back.entries(), as_metis(db));
}

TEST(MetisFormatTest, WritesMetisConventions) {
  const ModelSpec m = model_preset("gpt3-350m");
  const ProfileEntry e = analytic_profile(m, *find_device_type_preset("A100"), 2, 4, m.seq_len);
  const Json j = metis_profile_to_json(m, e);
  const double C = 1024, s = 2048, b = 4, t = 2;
  EXPECT_EQ(j["model"]["num_layers"], 26);
  // Whole-layer parameters at 2 bytes each, not divided by tp: 12C^2 + 13C per block.
  EXPECT_EQ(j["model"]["parameters"]["parameters_per_layer_bytes"][1].get<double>(),
            2 * (12 * C * C + 13 * C));
  // Memory: 16 bytes per parameter per tp rank plus the block's activations, in MiB.
  const double act = s * b * C * (10 + 24 / t + 5 * 16 * s / (C * t));
  EXPECT_DOUBLE_EQ(j["execution_memory"]["layer_memory_total_mb"][1].get<double>(),
                   (16 * (12 * C * C + 13 * C) / t + act) / 1048576.0);
  EXPECT_DOUBLE_EQ(j["execution_time"]["layer_compute_total_ms"][1].get<double>(),
                   e.units[1].forward_ms + e.units[1].backward_ms);
  // Metis's optimizer time is the whole model's; ETH's is per tp rank.
  EXPECT_DOUBLE_EQ(j["execution_time"]["optimizer_time_ms"].get<double>(), e.optimizer_ms * t);
}

// A tiny model (4 blocks: 6 Metis layers) written by hand, without execution_memory's list.
TEST(MetisFormatTest, RefusesAHandMadeFileWithAMissingField) {
  test::TempDir dir;
  const auto f = dir.path() / "DeviceType.A100_tp1_bs1.json";
  std::ofstream(f) << R"({
    "model": {"model_name": "tiny", "num_layers": 6,
              "parameters": {
                "total_parameters_bytes": 1,
                "parameters_per_layer_bytes": [40960, 99968, 99968, 99968, 99968, 33024],
                "activation_parameters_bytes": [8192, 8192, 8192, 8192, 8192, 32768]}},
    "execution_time": {"total_time_ms": 1, "forward_backward_time_ms": 1,
                       "batch_generator_time_ms": 0, "layernorm_grads_all_reduce_time_ms": 0,
                       "embedding_grads_all_reduce_time_ms": 0, "optimizer_time_ms": 0.1,
                       "layer_compute_total_ms": [0.1, 0.2, 0.2, 0.2, 0.2, 0.1]},
    "execution_memory": {"total_memory_mb": 10}
  })";
  const ModelSpec m = model_preset("tiny");
  try {
    read_metis_profile_dir(dir.path(), m);
    FAIL() << "execution_memory.layer_memory_total_mb is missing";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), f.string());
    EXPECT_EQ(e.path(), "execution_memory.layer_memory_total_mb");
  }
}

TEST(MetisFormatTest, RefusesAnotherModelByField) {
  test::TempDir dir;
  const ModelSpec m = model_preset("tiny");
  ProfileDb db(m);
  db.add(analytic_profile(m, *find_device_type_preset("A100"), 1, 1, m.seq_len));
  write_metis_profile_dir(db, dir.path());
  ModelSpec wider = m;
  wider.hidden = 128;
  try {
    read_metis_profile_dir(dir.path(), wider);
    FAIL() << "parameters of another model";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "model.parameters.parameters_per_layer_bytes[0]");
  }
  ModelSpec deeper = m;
  deeper.layers = 6;
  try {
    read_metis_profile_dir(dir.path(), deeper);
    FAIL() << "layer count of another model";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "model.num_layers");
  }
}

// The peers' 350M inputs: 40 files (A100 and RTX3090, tp 1-8, batch 1-16).
TEST(MetisFormatTest, ReadsTheSharedS1Inputs) {
  const auto s1 = kPeers / "s1_350m_2a100_2rtx3090";
  const ModelSpec m = model_preset("gpt3-350m");
  const ProfileDb db = read_metis_profile_dir(s1 / "profile", m);
  EXPECT_EQ(db.entries().size(), 2u * 4u * 5u);
  const double C = 1024, H = 16, s = 2048;
  for (const auto& [key, e] : db.entries()) {
    const double t = static_cast<double>(key.tp), b = static_cast<double>(key.mbs);
    const Json raw = read_json_file(s1 / "profile" / metis_profile_file_name(key), "test");
    // A block has 12C^2 + 13C parameters (2 bytes each in Metis's count).
    EXPECT_EQ(raw["model"]["parameters"]["parameters_per_layer_bytes"][5].get<double>() / 2,
              12 * C * C + 13 * C);
    EXPECT_EQ(e.units[5].params, unit_params(m, 5, key.tp));
    // Metis's block memory minus 16 B per parameter per rank is the standard activation formula
    // (to Metis's 1/128 MB rounding).
    const double act = s * b * C * (10 + 24 / t + 5 * H * s / (C * t));
    EXPECT_NEAR(e.units[5].activation.total(), act, 1e-6 * act) << key.device_type << " tp " << t;
    // Forward + backward is Metis's layer time; backward carries the larger share.
    const double layer_ms = raw["execution_time"]["layer_compute_total_ms"][5].get<double>();
    EXPECT_NEAR(e.units[5].forward_ms + e.units[5].backward_ms, layer_ms, 1e-12 * layer_ms);
    EXPECT_GT(e.units[5].backward_ms, e.units[5].forward_ms);
  }
  const ClusterSpec c = read_metis_cluster(s1 / "hostfile", s1 / "clusterfile.json");
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].device_type, "A100");
  EXPECT_EQ(c.nodes[0].devices, 2);
  EXPECT_EQ(c.nodes[1].device_type, "RTX3090");
  EXPECT_EQ(c.nodes[1].devices, 2);
  EXPECT_EQ(c.num_devices(), 4);
  // The clusterfile's GB/s become Gbps (x 8); TFLOPS stay the preset's.
  const double intra_gb_s =
      read_json_file(s1 / "clusterfile.json", "test")["10.0.0.1"]["intra_bandwidth"];
  EXPECT_DOUBLE_EQ(c.type("A100").intra_node_bandwidth_gbps, intra_gb_s * 8);
  EXPECT_DOUBLE_EQ(c.type("A100").tflops, find_device_type_preset("A100")->tflops);
}

// The peers' 70B inputs: 256 910B2 + 256 910B4 (Metis's B2 and B4).
TEST(MetisFormatTest, ReadsTheSharedS5Inputs) {
  const auto s5 = kPeers / "s5_70b_256b2_256b4";
  const ModelSpec m = model_preset("gpt3-70b");
  const ClusterSpec c = read_metis_cluster(s5 / "hostfile", s5 / "clusterfile.json");
  std::map<std::string, std::int64_t> devices;
  for (const auto& n : c.nodes) devices[n.device_type] += n.devices;
  EXPECT_EQ(devices, (std::map<std::string, std::int64_t>{{"910B2", 256}, {"910B4", 256}}));
  const ProfileDb db = read_metis_profile_dir(s5 / "profile", m, &c);
  EXPECT_TRUE(db.has_device_tp("910B2", 8));
  EXPECT_TRUE(db.has_device_tp("910B4", 1));
  const double C = 8192;
  const Json raw = read_json_file(s5 / "profile" / "DeviceType.B4_tp8_bs2.json", "test");
  EXPECT_EQ(raw["model"]["parameters"]["parameters_per_layer_bytes"][1].get<double>() / 2,
            12 * C * C + 13 * C);
  EXPECT_EQ(db.lookup("910B4", 8, 2).entry.units[1].params, unit_params(m, 1, 8));
}

class MetisClusterTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::filesystem::path host = dir.path() / "hostfile", cluster = dir.path() / "clusterfile.json";
  void write(const std::string& hosts, const std::string& clusterfile) {
    std::ofstream(host) << hosts;
    std::ofstream(cluster) << clusterfile;
  }
};

TEST_F(MetisClusterTest, CustomTypeNeedsItsTflops) {
  write("10.0.0.1 slots=4\n",
        R"({"10.0.0.1": {"instance_type": "V100", "inter_bandwidth": 12.5, "intra_bandwidth": 150,
            "memory": 32}})");
  try {
    read_metis_cluster(host, cluster);
    FAIL() << "V100 is not a preset and has no TFLOPS";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "10.0.0.1.instance_type");
  }
  const ClusterSpec c = read_metis_cluster(host, cluster, {{"V100", 125}});
  EXPECT_DOUBLE_EQ(c.type("V100").tflops, 125);
  EXPECT_DOUBLE_EQ(c.type("V100").intra_node_bandwidth_gbps, 150 * 8);
  EXPECT_DOUBLE_EQ(c.inter_node_bandwidth_gbps, 12.5 * 8);
}

TEST_F(MetisClusterTest, RefusesBadHostLinesAndMissingHosts) {
  const std::string a100 = R"({"10.0.0.1": {"instance_type": "A100", "inter_bandwidth": 25,
                                 "intra_bandwidth": 300, "memory": 80}})";
  write("10.0.0.1 slots=4\n10.0.0.2 slots=x\n", a100);
  try {
    read_metis_cluster(host, cluster);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "line 2");
  }
  write("# comment\n\n10.0.0.1 slots=4\n10.0.0.9 slots=4\n", a100);
  try {
    read_metis_cluster(host, cluster);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "10.0.0.9");
  }
}

}  // namespace
}  // namespace eth
