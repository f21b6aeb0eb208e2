// Whether this kernel lets one process read another's memory directly (process_vm_readv, Linux's
// cross-memory attach), which Open MPI's shared-memory transport then uses to move a large
// message in one copy made by the receiver. Containers may forbid the call (seccomp, missing
// ptrace permission); Open MPI would then fail the first large message, so eth launch asks first.
#pragma once

namespace eth {

// Forks a child that allows any process to trace it (as Open MPI's ranks do for each other),
// reads a word of its memory with process_vm_readv and compares it. false on any failure. Call
// it before starting threads (it forks); about a millisecond.
bool single_copy_available();

}  // namespace eth
