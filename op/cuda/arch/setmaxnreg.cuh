// Register reconfiguration (sm_90a): a warpgroup hands registers to another, so that
// warps that multiply get more than an even split of the register file gives them
// (s2d/s2d.cu's RegisterSplit). Elsewhere a no-op: those kernels keep the launch bound.
#pragma once

namespace alexconv {
namespace cuda {

// Moves registers between a CTA's warpgroups (sm_90a): each of a warpgroup's warps
// raises or lowers its register count to kRegs.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

}  // namespace cuda
}  // namespace alexconv
