// plan_bench's "sharding" section (issue 28): the paper's memory-bound scenarios planned with the
// optimizer state whole and sharded by free memory. In its own file to keep plan_bench.cpp
// under the size budget.
#pragma once

#include "core/json_cursor.h"

namespace eth::bench {

// quick: only 13B on 910B2/910B4.
Json run_sharding(bool quick);
void print_sharding(const Json& rows);

}  // namespace eth::bench
