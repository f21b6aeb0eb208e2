// The exit codes of ETH's processes, documented in `eth --help`, README.md and
// docs/exit-codes.md. cli/ returns them; launch/ also reads them from the ranks it starts
// (which of them mean "a device was lost" is launch/restart.h's) and returns them for the launch.
#pragma once

namespace eth {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;     // bad flags
inline constexpr int kExitInput = 2;     // bad input file or value, a plan that breaks a rule, or
                                         // an output that cannot be written
inline constexpr int kExitInternal = 3;  // a bug in ETH
inline constexpr int kExitComm = 4;      // a rank died or stopped answering (distributed runs)
inline constexpr int kExitNoPlan = 5;    // eth launch --elastic: no plan fits the devices left
inline constexpr int kExitSigint = 130;  // eth launch interrupted (128 + SIGINT)
inline constexpr int kExitSigterm = 143; // eth launch terminated (128 + SIGTERM)

}  // namespace eth
