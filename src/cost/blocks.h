// The block derivation moved to plan/blocks.h (it describes the plan, and the runtime uses it
// without the cost model). This forwarding header keeps code written against the old path
// compiling; include plan/blocks.h in new code.
#pragma once

#include "plan/blocks.h"
