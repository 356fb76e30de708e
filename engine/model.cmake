# numa.c: a GPU's NUMA node and its CPUs from sysfs (the CUDA bus id query
# only in CUDA builds), so GPU instances run on their GPU's socket
add_library(inferd_numa STATIC ${CMAKE_CURRENT_LIST_DIR}/numa.c)
target_link_libraries(inferd_numa PUBLIC inferd_base)
if(INFERD_HAVE_CUDA)
  target_link_libraries(inferd_numa PUBLIC CUDA::cudart)  # cudaDeviceGetPCIBusId only
  target_compile_definitions(inferd_numa PRIVATE INFERD_HAVE_CUDA=1)
endif()
add_library(inferd_model STATIC ${CMAKE_CURRENT_LIST_DIR}/model.c ${CMAKE_CURRENT_LIST_DIR}/model_run.c
  ${CMAKE_CURRENT_LIST_DIR}/model_opts.c ${CMAKE_CURRENT_LIST_DIR}/model_prepare.c ${CMAKE_CURRENT_LIST_DIR}/warmup.c
  ${CMAKE_CURRENT_LIST_DIR}/pad.c)
# model.c (lifecycle) -> model_run.c (the instances' threads), model_opts.c (the config read at
# create) and model_prepare.c (batch sizes prepared at load); model_run.c -> model_prepare.c: one way,
# see model_internal.h.
# inferd_config: the engine config struct model*.c, pad.c and warmup.c read (engine/repo/model_config.h)
target_link_libraries(inferd_model PUBLIC inferd_graph inferd_batch_sizes inferd_plan inferd_dev_seg inferd_config inferd_proto inferd_base inferd_numa Threads::Threads)
if(INFERD_HAVE_CUDA)
  target_link_libraries(inferd_model PUBLIC inferd_plan_cuda)
endif()
