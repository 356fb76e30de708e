# tests/unit/clients/clients.cmake: the load generator's pieces that need no
# server: latency histogram and stability rule, command line and ranges,
# input shapes and the ModelInferRequest encoder (decoded back with protobuf-c),
# shared memory objects (created, read back and removed in /dev/shm), and
# --streaming's message bytes (ids appended to requests, answers scanned,
# error messages mapped to kinds), and generate mode's length distributions,
# prompts, SSE parsing, payloads and options (test_ld_gen).
if(TARGET inferd_load)
  inferd_unit_test(test_ld_hist SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ld_hist.c LIBS inferd_load)
  inferd_unit_test(test_ld_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ld_cli.c LIBS inferd_load)
  inferd_unit_test(test_ld_request SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ld_request.c LIBS inferd_load)
  inferd_unit_test(test_ld_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ld_shm.c LIBS inferd_load)
  inferd_unit_test(test_ld_stream_msg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ld_stream_msg.c LIBS inferd_load)
  inferd_unit_test(test_ld_gen SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ld_gen.c LIBS inferd_load)
endif()
# inferd-tune's search (clients/tune/search.py) on synthetic landscapes, and its CSV and HTML from such
# a search, and its reading of /metrics text; the latency-target bench's cell choice and verdicts
# (tests/bench/lattarget/pick.py, table.py): pytest, no server, no browser.
add_test(NAME tune_search COMMAND ${INFERD_PYTHON} -m pytest -q -p no:cacheprovider
         ${CMAKE_CURRENT_LIST_DIR}/test_tune_search.py ${CMAKE_CURRENT_LIST_DIR}/test_tune_report.py
         ${CMAKE_CURRENT_LIST_DIR}/test_tune_metrics.py ${CMAKE_CURRENT_LIST_DIR}/test_lattarget_bench.py)
