// kernels/k_pdl.cuh: programmatic dependent launch (sm_90 and later). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start
// while the stream's previous kernel still runs; k_pdl_wait() is where it
// waits for that kernel's end and its writes (work before it must not read
// what the previous kernel writes). k_pdl_release() lets the stream's next
// kernel, if launched that way, start once every block of this one has run
// it. Both are no-ops on older devices and for kernels launched plainly.
// The decode step's GEMVs use them (kernels/gemm/k_gemv.cu), and the kernels
// before a GEMV release it early (kernels/attn/k_paged_attn.cu).
#pragma once

static __device__ __forceinline__ void k_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void k_pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
