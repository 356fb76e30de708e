# kernels/base/base.cmake: inferd_base, the error value (err.h) and the
# tensor element types (dtype.h) that every layer speaks, and the one rule
# for files a model names (confine.h: inside its directory, links resolved;
# rfile.h: regular files only, opened without blocking),
# UTF-8 validation of client strings (utf8.h) and the monotonic clock
# every layer times with (clock.h, header only): the kernels'
# launchers, the engine, the batcher, the server and the clients. It sits
# below all of them, so it depends on nothing but libc. Its home is under
# kernels/ because kernels/ is the lowest layer of the tree (it depends on
# no other folder), so every folder that includes kernels/base/ already sits
# on top of it; under engine/ it made the batcher, the kernels and the
# clients look as though they depended on the engine.
add_library(inferd_base STATIC
  ${CMAKE_CURRENT_LIST_DIR}/err.c
  ${CMAKE_CURRENT_LIST_DIR}/dtype.c
  ${CMAKE_CURRENT_LIST_DIR}/confine.c
  ${CMAKE_CURRENT_LIST_DIR}/rfile.c
  ${CMAKE_CURRENT_LIST_DIR}/strwire.c
  ${CMAKE_CURRENT_LIST_DIR}/utf8.c)
