add_library(inferd_model STATIC ${CMAKE_CURRENT_LIST_DIR}/model.c)
target_link_libraries(inferd_model PUBLIC inferd_graph inferd_proto inferd_base Threads::Threads)
