# tests/unit/server/reflection.cmake: server reflection answers, and the
# wire-compatibility check of our protos against tritonclient's.
inferd_unit_test(test_reflection SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reflection.c
                 LIBS inferd_reflection inferd_protoset inferd_proto)

# Needs tritonclient in INFERD_PYTHON (the project's venv); it fails loudly when missing.
add_test(NAME check_proto_compat
         COMMAND ${INFERD_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_proto_compat.py ${CMAKE_SOURCE_DIR})
set_tests_properties(check_proto_compat PROPERTIES TIMEOUT 60)
