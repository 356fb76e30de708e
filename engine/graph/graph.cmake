# engine/graph/graph.cmake: the graph room, two libraries, one on the other:
#   inferd_graph_ir  the representation (graph.c: values, nodes, attributes,
#                    the accessors of graph.h and the mutations passes make);
#                    what the op families parse from, so it depends on nothing
#   inferd_graph     the ONNX loader (load.c) and its load-time passes
#                    (graph_pass*.c), which fold constants by running the op
#                    families (inferd_ops) and ask the registry what is supported
# The dependency runs ir <- ops <- graph, with no way back.
add_library(inferd_graph_ir STATIC ${CMAKE_CURRENT_LIST_DIR}/graph.c)
target_link_libraries(inferd_graph_ir PUBLIC inferd_base)
add_library(inferd_graph STATIC
  ${CMAKE_CURRENT_LIST_DIR}/load.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass_norm.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass_qdq.c)
target_link_libraries(inferd_graph PUBLIC inferd_graph_ir inferd_ops inferd_proto inferd_base inferd_kernels)
