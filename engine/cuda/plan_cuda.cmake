# engine/cuda/plan_cuda.cmake: the CUDA execution of a plan (plan_cuda.c:
# create, submit, finish; plan_cuda_prep.c: batch sizes prepared before
# serving, lazy prepares counted; plan_cuda_slot.c: a slot's memory, staging,
# enqueueing and graphs; plan_cuda_fuse.c: each run's fusions;
# plan_cuda_layout.c: its NHWC regions; plan_cuda_host.c: nodes run on the
# host (host fallback); plan_cuda_util.c: what the op
# families share with the plan), the weights
# shared by a model's plans on each device (cuda_weights.c) and its few
# kernels of its own (plan_cuda_k.cu). The op families' CUDA paths join
# this library from engine/ops/ops.cmake, with the CUDA op registry
# (engine/ops/registry_cuda.c). Included by engine/CMakeLists.txt
# inside if(INFERD_HAVE_CUDA).
add_library(inferd_plan_cuda STATIC
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_fuse.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_layout.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_slot.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_prep.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_util.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_host.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_weights.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_cuda_k.cu)
target_link_libraries(inferd_plan_cuda PUBLIC inferd_plan inferd_graph inferd_dev_seg inferd_cuda inferd_kernels_cuda
  inferd_kernels CUDA::cudart inferd_base)
set_target_properties(inferd_plan_cuda PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  POSITION_INDEPENDENT_CODE ON)
# The directory-wide warning and sanitizer flags are for the host compiler;
# nvcc gets them through -Xcompiler (the C source keeps them as they are).
get_target_property(_pc_opts inferd_plan_cuda COMPILE_OPTIONS)
if(_pc_opts)
  set(_pc_keep)
  foreach(_o ${_pc_opts})
    list(APPEND _pc_keep $<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${_o}>)
  endforeach()
  set_target_properties(inferd_plan_cuda PROPERTIES COMPILE_OPTIONS "${_pc_keep}")
endif()
target_compile_options(inferd_plan_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${INFERD_WERROR}>>:-Xcompiler=-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${INFERD_WERROR}>>:--Werror=all-warnings>)
