// The collectives a tensor-parallel stage computation issues inside its forward and backward
// (DESIGN.md section 8): sums after the row-parallel products and after the column-parallel
// input gradients, and the max and sum of the vocabulary-parallel cross-entropy. An interface,
// so train/ needs no communicator: the runtime implements it over the stage's tp communicator
// (runtime/tp_comm.h). Every rank of a tp group calls the same operations in the same order with
// the same sizes, and every rank receives the same bytes. Not thread-safe.
#pragma once

#include <span>

namespace eth {

class TpGroup {
 public:
  virtual ~TpGroup() = default;
  virtual int size() const = 0;
  virtual void allreduce_sum(std::span<float> data) = 0;
  virtual void allreduce_sum(std::span<double> data) = 0;
  virtual void allreduce_max(std::span<float> data) = 0;
  virtual void allreduce_max(std::span<double> data) = 0;
};

}  // namespace eth
