# train_bench (bench/train_bench.cpp): ETH bf16 and fp32 training steps beside PyTorch fp32 and
# bf16 (autocast), PyTorch installed by the bench into a virtualenv here (torch-venv, the newest
# torch from PyPI). Kept in its own file so bench/CMakeLists.txt needs one include line.
add_executable(train_bench ${CMAKE_CURRENT_LIST_DIR}/train_bench.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/train_bench_cpu.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/train_bench_cpu_report.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/train_bench_device.cpp)
target_link_libraries(train_bench PRIVATE eth_train eth_data eth_cluster eth_bench_util
                                          CLI11::CLI11)
target_compile_definitions(train_bench PRIVATE ETH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                               ETH_BENCH_VENV="${CMAKE_CURRENT_BINARY_DIR}/torch-venv")
eth_set_warnings(train_bench)
eth_unity(train_bench)
