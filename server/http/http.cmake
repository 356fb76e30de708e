# server/http/http.cmake: the libuv HTTP/1.1 endpoint (health, metrics, dashboard transport).
# Parser: nodejs http-parser 2.9 from Debian's libhttp-parser-dev (no .pc file, so found by hand).
find_path(HTTP_PARSER_INCLUDE_DIR http_parser.h REQUIRED)
find_library(HTTP_PARSER_LIB http_parser REQUIRED)

# HTTPS on the same port (--http-use-ssl): libssl over memory BIOs; the
# certificate files are checked by inferd_tls (server/sec/tls.cmake).
pkg_check_modules(LIBSSL REQUIRED IMPORTED_TARGET libssl)
add_library(inferd_http_tls STATIC ${CMAKE_CURRENT_LIST_DIR}/http_tls.c)
target_link_libraries(inferd_http_tls PUBLIC inferd_tls_ssl inferd_tls inferd_base PkgConfig::LIBSSL)

# http.c (public API) -> http_accept.c (accepting, the cap, the sweep) -> http_conn.c (a
# connection's I/O) -> http_parse.c (parser callbacks, limits): one way, see http_internal.h
add_library(inferd_http STATIC ${CMAKE_CURRENT_LIST_DIR}/http.c ${CMAKE_CURRENT_LIST_DIR}/http_accept.c
  ${CMAKE_CURRENT_LIST_DIR}/http_conn.c ${CMAKE_CURRENT_LIST_DIR}/http_parse.c)
target_include_directories(inferd_http PUBLIC ${HTTP_PARSER_INCLUDE_DIR})
target_link_libraries(inferd_http PUBLIC inferd_http_tls inferd_base PkgConfig::LIBUV ${HTTP_PARSER_LIB})

# Content codings (gzip, deflate) of REST bodies, Triton's HTTP compression: zlib (zlib1g-dev).
find_package(ZLIB REQUIRED)
add_library(inferd_httpz STATIC ${CMAKE_CURRENT_LIST_DIR}/httpz.c)
target_link_libraries(inferd_httpz PUBLIC inferd_base ZLIB::ZLIB)
