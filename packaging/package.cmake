# `cpack -G DEB` from the build directory makes an installable .deb.
set(CPACK_PACKAGE_NAME allocscope)
set(CPACK_PACKAGE_CONTACT "allocscope developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "eBPF heap allocation sampler for Linux")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libbpf1, libelf1, libdw1, libjemalloc2")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
include(CPack)
