# kernels/cuda.cmake: inferd_kernels_cuda, the CUDA twins of the C reference
# kernels (k_cuda.h), one op family per folder (kernels/<family>/k_*.cu). Included by
# kernels/CMakeLists.txt only when the CUDA toolchain was found.
file(GLOB _k_cuda_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*/k_*.cu)
add_library(inferd_kernels_cuda STATIC ${_k_cuda_sources})
target_include_directories(inferd_kernels_cuda PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(inferd_kernels_cuda PUBLIC CUDA::cudart inferd_base)
# C callers link this archive with the C linker: resolve device code here.
set_target_properties(inferd_kernels_cuda PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  POSITION_INDEPENDENT_CODE ON)
# The directory-wide -Wall/-Wextra (-Werror with INFERD_WERROR) and sanitizer flags are for the
# host compiler; nvcc takes them through -Xcompiler. No fast-math: the
# kernels rely on IEEE division, sqrt and denormals to match the references.
get_target_property(_k_opts inferd_kernels_cuda COMPILE_OPTIONS)
if(_k_opts)
  set(_k_keep)
  foreach(_o ${_k_opts})
    if(_o MATCHES "^-W|^-fsanitize|^-fno-omit-frame-pointer|^-fno-sanitize-recover")
      continue()
    endif()
    list(APPEND _k_keep ${_o})
  endforeach()
  set_target_properties(inferd_kernels_cuda PROPERTIES COMPILE_OPTIONS "${_k_keep}")
endif()
target_compile_options(inferd_kernels_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${INFERD_WERROR}>>:-Xcompiler=-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${INFERD_WERROR}>>:--Werror=all-warnings>)
