# tests/unit/server/reflection.cmake: server reflection answers, and the
# wire-compatibility check of our protos against tritonclient's.
inferd_unit_test(test_reflection SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reflection.c
                 LIBS inferd_reflection inferd_protoset inferd_proto)

set(INFERD_TEST_PYTHON /tmp/venv/bin/python CACHE FILEPATH "Python with tritonclient and grpcio-reflection")
if(EXISTS ${INFERD_TEST_PYTHON})
  add_test(NAME check_proto_compat
           COMMAND ${INFERD_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_proto_compat.py ${CMAKE_SOURCE_DIR})
  set_tests_properties(check_proto_compat PROPERTIES TIMEOUT 60)
endif()
