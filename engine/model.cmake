add_library(inferd_model STATIC ${CMAKE_CURRENT_LIST_DIR}/model.c ${CMAKE_CURRENT_LIST_DIR}/warmup.c
  ${CMAKE_CURRENT_LIST_DIR}/pad.c)
target_link_libraries(inferd_model PUBLIC inferd_graph inferd_proto inferd_base Threads::Threads)
if(INFERD_HAVE_CUDA)
  target_link_libraries(inferd_model PUBLIC inferd_plan_cuda)
endif()
