# lld where the compiler accepts -fuse-ld=lld (Debian: lld): every test, bench and tool binary
# links all the static libraries it uses, and GNU ld spends several times lld's CPU on each, a
# cost CI pays twice (Release and ASan passes). The linker changes no code. -DETH_LLD=OFF: the
# compiler's default linker.
option(ETH_LLD "Link with lld where the compiler accepts -fuse-ld=lld" ON)
if(ETH_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld ETH_HAVE_LLD)
  if(ETH_HAVE_LLD)
    add_link_options($<$<LINK_LANGUAGE:CXX>:-fuse-ld=lld>)
  endif()
endif()
