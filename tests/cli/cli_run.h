// Kept for files that still include it by this name: the one way to run `eth` is eth_run.h.
#pragma once

#include "eth_run.h"
