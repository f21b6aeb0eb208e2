# multihost_bench (bench/multihost_bench.cpp): transfers, aggregation and iterations across
# namespace hosts with shaped links, beside the predictor. Starts mpirun and `eth launch`.
if(TARGET eth_runtime AND ETH_WITH_MPI)
  add_executable(multihost_bench ${CMAKE_CURRENT_LIST_DIR}/multihost_bench.cpp)
  target_link_libraries(multihost_bench PRIVATE eth_runtime eth_comm_mpi eth_search eth_train
    eth_profile eth_bench_util eth_launch)
  target_compile_definitions(multihost_bench PRIVATE ETH_BINARY_PATH="$<TARGET_FILE:eth>"
    ETH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(multihost_bench eth)
  eth_set_warnings(multihost_bench)
endif()
