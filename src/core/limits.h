// The range of every number ETH reads (files and flags), in one place; docs/input-limits.md
// lists them with their reasons. Loaders check them at load time, so nothing past the boundary
// can overflow, divide by a subnormal or loop for longer than its documented bound: speeds,
// bandwidths and memories are normal positive numbers within physical bounds; counts stay
// within what the planner searches in bounded time and what 64-bit sizes can hold.
#pragma once

#include <cstdint>

namespace eth::limits {

// Device types (cluster files, Metis clusterfiles). Wide enough for an emulated CPU core and for
// hardware decades ahead; narrow enough that no product of them overflows a double.
inline constexpr double kMinTflops = 1e-6, kMaxTflops = 1e6;                // 1 MFLOPS .. 1 EFLOPS
inline constexpr double kMinMemoryGb = 1e-3, kMaxMemoryGb = 1e6;            // 1 MB .. 1 PB
inline constexpr double kMinBandwidthGbps = 1e-3, kMaxBandwidthGbps = 1e7;  // 1 Mbit/s .. 10 Pbit/s
inline constexpr double kMaxEmulatedSlowdown = 1e6;
// Device type names become file names (profiles): letters, digits, '.', '_', '-'.
inline constexpr std::int64_t kMaxTypeNameBytes = 64;
// Other names (clusters, models) are shown, never used as paths.
inline constexpr std::int64_t kMaxNameBytes = 256;

// Clusters. The planner answers for kMaxClusterDevices in bounded time (docs/planner.md, "Scale").
inline constexpr std::int64_t kMaxDevicesPerNode = 1 << 16;
inline constexpr std::int64_t kMaxClusterDevices = 1 << 18;  // 262,144
inline constexpr std::int64_t kMaxDeviceTypes = 16;

// Models.
inline constexpr std::int64_t kMaxLayers = 256;  // the unit split is quadratic in layers
inline constexpr std::int64_t kMaxHidden = 1 << 17;
inline constexpr std::int64_t kMaxHeads = 1 << 12;
inline constexpr std::int64_t kMaxSeqLen = 1 << 20;
inline constexpr std::int64_t kMaxVocab = 1 << 22;
inline constexpr std::int64_t kMaxFfn = 1 << 19;

// Batches and parallelism (plans, profiles, eth plan's flags).
inline constexpr std::int64_t kMaxGlobalBatch = 1 << 24;  // samples per step
inline constexpr std::int64_t kMaxMicroBatch = 1 << 16;
inline constexpr std::int64_t kMaxTp = 1 << 10;

// Profiles (ETH and Metis): per unit and micro-batch. A time is 0 or in [1 ns, ~11.6 days].
inline constexpr double kMinTimeMs = 1e-6, kMaxTimeMs = 1e9;
inline constexpr double kMinBytes = 1e-3, kMaxBytes = 1e15;  // activation and memory figures
inline constexpr std::int64_t kMaxParams = 10'000'000'000'000;  // 1e13 per unit

}  // namespace eth::limits
