# Warnings applied to every ETH target through eth_set_warnings(target).
function(eth_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wimplicit-fallthrough)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports impossible memcpy overlaps inside std::string at -O2/-O3 (GCC bug 105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(ETH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Declares a module library from every .cpp in the calling folder: eth_module(name DEPS ...).
function(eth_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB M_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(eth_${name} STATIC ${M_SOURCES})
  target_include_directories(eth_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(eth_${name} PUBLIC ${M_DEPS})
  eth_set_warnings(eth_${name})
  eth_unity_src(eth_${name})
endfunction()
