# train_bench (bench/train_bench.cpp): ETH's training step beside its GEMM library and PyTorch.
# Kept in its own file so bench/CMakeLists.txt needs one include line.
add_executable(train_bench ${CMAKE_CURRENT_LIST_DIR}/train_bench.cpp)
target_link_libraries(train_bench PRIVATE eth_train eth_data CLI11::CLI11)
target_compile_definitions(train_bench PRIVATE ETH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
eth_set_warnings(train_bench)
