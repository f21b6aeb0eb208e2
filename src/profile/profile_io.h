// ETH's own profile directory: one JSON file per (device type, tp, micro-batch size), named
// `<device_type>_tp<T>_mbs<B>.json`, holding every unit's times, parameters, activation bytes per
// operator class and recompute costs (docs/profile.md has the schema). Not Metis's format: see
// profile/metis_format.h.
#pragma once

#include <filesystem>
#include <string>

#include "core/json_cursor.h"
#include "profile/profile.h"

namespace eth {

inline constexpr const char* kProfileFormat = "eth-profile";
// Version 2 added "precision"; version 1 files are read as fp32 (measured) or mixed16 (the
// others), what they were written for.
inline constexpr int kProfileFormatVersion = 2;

// `<device_type>_tp<T>_mbs<B>.json`
std::string profile_file_name(const ProfileKey& key);

Json profile_entry_to_json(const ModelSpec& m, const ProfileEntry& e);
// Reads one entry; `source` names the file in errors. Refuses unknown fields, wrong types,
// negative times or bytes, a model other than `m`, a unit count other than m's, and an unknown
// precision.
ProfileEntry parse_profile_entry(const JsonCursor& c, const ModelSpec& m);

// Writes every entry of `db` into `dir` (created if missing), each file atomically. Returns the
// number of files written.
std::size_t write_profile_dir(const ProfileDb& db, const std::filesystem::path& dir);
// Reads every *.json file of `dir`. Throws InputError naming the file and JSON path of the first
// bad one, when a file's name disagrees with its content, when two files of one device type
// were measured in different precisions, or when the folder holds no profile.
ProfileDb read_profile_dir(const std::filesystem::path& dir, const ModelSpec& m);

}  // namespace eth
