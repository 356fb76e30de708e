# server/sec/tls.cmake: the gRPC port's certificates, read and checked with libcrypto, and reloaded while serving.
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
add_library(inferd_tls STATIC ${CMAKE_CURRENT_LIST_DIR}/tls.c ${CMAKE_CURRENT_LIST_DIR}/tls_watch.c)
target_link_libraries(inferd_tls PUBLIC inferd_base PkgConfig::LIBCRYPTO Threads::Threads)
