// Metis's file formats, read and written so a Metis user can switch with the files they have:
// profile files `DeviceType.{NAME}_tp{T}_bs{B}.json`, the `hostfile` ("IP slots=N" lines) and
// `clusterfile.json` ({IP: {instance_type, inter_bandwidth, intra_bandwidth, memory}}, GB/s and
// GB). Metis stores totals only; how ETH splits them (forward/backward, operator classes) is in
// docs/profile.md. Not ETH's own format: see profile/profile_io.h.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "cluster/cluster_spec.h"
#include "core/json_cursor.h"
#include "profile/profile.h"

namespace eth {

// Metis names the Ascend types B2, B3, B4; ETH calls them 910B2, 910B3, 910B4. Other names are
// the same in both.
std::string metis_to_eth_device_name(const std::string& metis_name);
std::string eth_to_metis_device_name(const std::string& eth_name);

// `DeviceType.{NAME}_tp{T}_bs{B}.json`, NAME in Metis's spelling.
std::string metis_profile_file_name(const ProfileKey& key);
// True when `dir` holds at least one `DeviceType.*.json` file.
bool is_metis_profile_dir(const std::filesystem::path& dir);

// One entry as Metis's JSON. Throws InputError when the entry's sequence length is not the
// model's (Metis files carry no sequence length; a reader assumes the model's).
Json metis_profile_to_json(const ModelSpec& m, const ProfileEntry& e);
// One Metis file. `device` is the entry's device type (its figures shape the split of Metis's
// totals); key comes from the file name. Missing or mistyped fields throw InputError naming the
// file and the field; so do per-layer lists of the wrong length, parameter counts that are not
// the model's, and memory below what the layer's weights and optimizer state need.
ProfileEntry parse_metis_profile(const JsonCursor& c, const ModelSpec& m, const DeviceType& device,
                                 const ProfileKey& key);

// Writes every entry of `db`, atomically per file; returns the number of files.
std::size_t write_metis_profile_dir(const ProfileDb& db, const std::filesystem::path& dir);
// Reads every `DeviceType.*.json` of `dir` (other files are not Metis profiles and are left
// alone). Device types are looked up in `cluster` when given, else among the presets; a type in
// neither is refused (its figures are needed to split Metis's totals).
ProfileDb read_metis_profile_dir(const std::filesystem::path& dir, const ModelSpec& m,
                                 const ClusterSpec* cluster = nullptr);

// Metis's hostfile + clusterfile as a ClusterSpec: one node per hostfile line, in order. Types
// that are presets (after B2 -> 910B2) keep the preset's TFLOPS and take memory and bandwidths
// (GB/s x 8 = Gbps) from the clusterfile. Any other type needs its peak TFLOPS from `tflops`
// (Metis's files do not carry it); without it the type is refused by name.
ClusterSpec read_metis_cluster(const std::filesystem::path& hostfile,
                               const std::filesystem::path& clusterfile,
                               const std::map<std::string, double>& tflops = {});

}  // namespace eth
