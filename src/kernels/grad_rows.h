// Row chunks of a weight gradient stored apart from each other. A gradient layout that gives
// every all-reduce block one contiguous range (runtime/grad_layout.h) cuts a tp shard into the
// lcm(tp) chunks of its segment when the chunks reduce over different groups; the weight-gradient
// GEMMs then write each chunk in place (the *_backward_rows kernels) instead of into a whole
// tensor that would have to be copied apart.
#pragma once

#include <cstdint>

namespace eth {

// Rows [begin, end) of a weight gradient (row-major, the tensor's row length) start at
// `dweight`; with `dbias`, the same rows of a bias cut with the weight (column-parallel).
// `begin`/`end` count from the first row of the weight the kernel is given.
template <typename G>
struct GradRows {
  std::int64_t begin = 0, end = 0;
  G* dweight = nullptr;
  G* dbias = nullptr;
};

}  // namespace eth
