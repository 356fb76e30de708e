# tests/unit/server/ensemble_plan.cmake: an ensemble's config checked against its members and made a plan (server/core/ensemble_plan.h).
inferd_unit_test(test_ensemble_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ensemble_plan.c LIBS inferd_server)
