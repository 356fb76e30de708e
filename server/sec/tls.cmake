# server/sec/tls.cmake: the gRPC port's certificates, read and checked with libcrypto, and reloaded while serving.
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
add_library(inferd_tls STATIC ${CMAKE_CURRENT_LIST_DIR}/tls.c ${CMAKE_CURRENT_LIST_DIR}/tls_watch.c)
target_link_libraries(inferd_tls PUBLIC inferd_base PkgConfig::LIBCRYPTO Threads::Threads)

# An OpenSSL server context from a checked set: the HTTPS terminator (server/http/http_tls.c) and the
# gRPC port's (server/grpc/grpc_tls.c) build theirs here.
if(NOT TARGET PkgConfig::LIBSSL)
  pkg_check_modules(LIBSSL REQUIRED IMPORTED_TARGET libssl)
endif()
add_library(inferd_tls_ssl STATIC ${CMAKE_CURRENT_LIST_DIR}/tls_ssl.c)
target_link_libraries(inferd_tls_ssl PUBLIC inferd_tls PkgConfig::LIBSSL)
