# tests/unit/engine/numa.cmake: tests for engine/numa.c (a GPU's NUMA node and CPUs, on fake sysfs trees).
inferd_unit_test(test_numa SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_numa.c LIBS inferd_numa)
