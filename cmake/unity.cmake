# Unity builds: a target's .cpp files compiled as one translation unit per batch. Most of a
# test or bench TU's cost is headers (gtest, json, the modules'), parsed once per batch instead
# of once per file; on 2 cores that is most of CI's compile time (docs/testing.md).
# -DETH_UNITY=OFF: one TU per file, as before (say, to check that every file includes what it
# uses, which a unity batch can hide).
option(ETH_UNITY "Unity builds of the test and bench targets" ON)
# The src/ libraries too: off by default, so the Release build (the product) keeps one TU per
# file and its numerics (inlining, FP contraction across what were file boundaries) never depend
# on how files were batched. scripts/test.sh turns it on for the ASan pass only.
option(ETH_UNITY_SRC "Unity builds of the src/ libraries (the ASan pass of scripts/test.sh)" OFF)
set(ETH_UNITY_BATCH 8 CACHE STRING "Source files per unity TU")

# Every target that may be built as unity TUs, whatever the options say now: eth_unity_check()
# inspects them all, so a configure without unity fails on the same file as one with it.
function(eth_unity_register target)
  set_property(GLOBAL APPEND PROPERTY ETH_UNITY_TARGETS ${target})
endfunction()

# Registers target and, where `enabled`, builds it as unity TUs of ETH_UNITY_BATCH files.
function(eth_unity_if target enabled)
  eth_unity_register(${target})
  if(enabled)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                          UNITY_BUILD_BATCH_SIZE ${ETH_UNITY_BATCH})
  endif()
endfunction()

# A test or bench target.
function(eth_unity target)
  eth_unity_if(${target} ${ETH_UNITY})
endfunction()

# A src/ library (eth_module() and the C++ libraries written out by hand; not the CUDA one,
# eth_kernels_cuda, whose .cu files stay one TU each).
function(eth_unity_src target)
  eth_unity_if(${target} ${ETH_UNITY_SRC})
endfunction()

# eth_unity_skip(target file...): compile these files of target as TUs of their own. For files
# whose file-local names (anonymous namespace, static constants) collide with another file of
# the same library; paths are relative to target's folder.
function(eth_unity_skip target)
  get_target_property(dir ${target} SOURCE_DIR)
  set(files "")
  foreach(f IN LISTS ARGN)
    list(APPEND files ${dir}/${f})
  endforeach()
  set_source_files_properties(${files} TARGET_DIRECTORY ${target}
                              PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# Fails the configure if a source compiled with ISA flags of its own (-march, -mavx2, ... in its
# COMPILE_OPTIONS or COMPILE_FLAGS) could join a unity TU. Such a file exists to be compiled for
# another ISA than the rest of its target (kernels/cpu's run-time dispatch is baseline x86-64 in
# a -march=native library): batched with generic code it would lose its flags, or lend them to
# the generic code, and a CPU without AVX-512 could then meet AVX-512 instructions. Called once,
# after every target is declared.
function(eth_unity_check)
  get_property(targets GLOBAL PROPERTY ETH_UNITY_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(dir ${target} SOURCE_DIR)
    get_target_property(sources ${target} SOURCES)
    foreach(src IN LISTS sources)
      cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY ${dir} OUTPUT_VARIABLE path)
      get_source_file_property(options ${path} TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
      get_source_file_property(flags ${path} TARGET_DIRECTORY ${target} COMPILE_FLAGS)
      get_source_file_property(skip ${path} TARGET_DIRECTORY ${target} SKIP_UNITY_BUILD_INCLUSION)
      if(NOT options)
        set(options "")
      endif()
      if(NOT flags)
        set(flags "")
      endif()
      if("${options};${flags}" MATCHES "(^|[; ])-m" AND NOT skip)
        message(FATAL_ERROR "${path} (target ${target}) has ISA flags of its own "
          "(COMPILE_OPTIONS '${options}', COMPILE_FLAGS '${flags}') but may join a unity TU: "
          "give it SKIP_UNITY_BUILD_INCLUSION ON beside those flags (cmake/unity.cmake)")
      endif()
    endforeach()
  endforeach()
endfunction()
