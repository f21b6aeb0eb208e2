# kernel_bench (bench/kernel_bench.cpp): fp32 vs bf16 GEMMs and one transformer block on
# gpt2-small shapes. Kept in its own file so bench/CMakeLists.txt needs one include line.
add_executable(kernel_bench ${CMAKE_CURRENT_LIST_DIR}/kernel_bench.cpp)
target_link_libraries(kernel_bench PRIVATE eth_kernels eth_bench_util CLI11::CLI11)
eth_set_warnings(kernel_bench)
