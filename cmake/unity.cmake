# Unity builds: a target's .cpp files compiled as one translation unit per batch. Most of a
# test or bench TU's cost is headers (gtest, json, the modules'), parsed once per batch instead
# of once per file; on 2 cores that is most of CI's compile time (docs/testing.md).
# -DETH_UNITY=OFF: one TU per file, as before (say, to check that every file includes what it
# uses, which a unity batch can hide).
option(ETH_UNITY "Unity builds of the test and bench targets" ON)
set(ETH_UNITY_BATCH 8 CACHE STRING "Source files per unity TU")
function(eth_unity target)
  if(ETH_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                          UNITY_BUILD_BATCH_SIZE ${ETH_UNITY_BATCH})
  endif()
endfunction()
