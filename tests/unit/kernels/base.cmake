# tests/unit/kernels/base.cmake: the base module (kernels/base/: err, utf8, dtype, rfile, confine and strwire).
inferd_unit_test(test_utf8 SOURCES ${CMAKE_CURRENT_LIST_DIR}/base/test_utf8.c LIBS inferd_base)
inferd_unit_test(test_err SOURCES ${CMAKE_CURRENT_LIST_DIR}/base/test_err.c LIBS inferd_base)
inferd_unit_test(test_rfile SOURCES ${CMAKE_CURRENT_LIST_DIR}/base/test_rfile.c LIBS inferd_base)
inferd_unit_test(test_confine SOURCES ${CMAKE_CURRENT_LIST_DIR}/base/test_confine.c LIBS inferd_base)
inferd_unit_test(test_strwire SOURCES ${CMAKE_CURRENT_LIST_DIR}/base/test_strwire.c LIBS inferd_base)
