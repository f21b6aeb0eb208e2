# ETH_SANITIZE=address turns on AddressSanitizer and UndefinedBehaviorSanitizer for everything.
if(ETH_SANITIZE STREQUAL "address")
  # C++ only: nvcc takes no -fsanitize (the CUDA sources are not instrumented).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
elseif(NOT ETH_SANITIZE STREQUAL "")
  message(FATAL_ERROR "ETH_SANITIZE: unknown value '${ETH_SANITIZE}'; expected '' or 'address'")
endif()
