// Hopper warpgroup MMA (wgmma, sm_90a) for the implicit GEMM.
//
// A warpgroup (4 warps) multiplies a 64-pixel x K A tile held in registers -- each
// warp's 16 rows in exactly the mma.sync m16n8k16 (or m16n8k8 tf32) fragment
// layout, so the same gathered im2col fragments feed both engines -- by a K x 96
// B tile that the tensor cores read straight from shared memory. B is stored
// K-major without swizzle: 8-row x 16-byte core matrices, the two K halves of a
// 16-tap (or 8-tap tf32) block adjacent (LBO), the twelve 8-channel groups next
// (SBO). The wgmma.* instructions exist only in sm_90a code.
#pragma once

#include <cstdint>

namespace alexconv {
namespace cuda {
namespace wgmma {

constexpr int kBlockBytes = 96 * 32;  // one B block: 96 channels x 32 bytes of K
constexpr uint32_t kLeadingBytes = 128, kStrideBytes = 256;

// Byte offset of channel n, K byte `kbyte` (0..31) inside a block.
__device__ __forceinline__ int block_offset(int n, int kbyte) {
  return ((n >> 3) * 2 + (kbyte >> 4)) * 128 + (n & 7) * 16 + (kbyte & 15);
}

// A no-swizzle, K-major shared-memory operand: 8-row x 16-byte core matrices,
// `leading` bytes apart along K, `stride` bytes apart along M (or N).
__device__ __forceinline__ uint64_t descriptor(uint32_t smem_addr, uint32_t leading,
                                               uint32_t stride) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t(leading >> 4) << 16) |
         (uint64_t(stride >> 4) << 32);
}
// A B block's.
__device__ __forceinline__ uint64_t descriptor(uint32_t smem_addr) {
  return descriptor(smem_addr, kLeadingBytes, kStrideBytes);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ALEXCONV_WGMMA_ASM(text) asm volatile(text ::: "memory")
#else
#define ALEXCONV_WGMMA_ASM(text) __trap()
#endif

// Orders this thread's register writes (A fragments, accumulators set at a tile's start)
// before the asynchronous MMAs that read them.
__device__ __forceinline__ void fence() { ALEXCONV_WGMMA_ASM("wgmma.fence.sync.aligned;\n"); }
__device__ __forceinline__ void commit() { ALEXCONV_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n"); }
template <int kPending>
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#else
  __trap();
#endif
}

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

// Keeps the compiler from moving reads or writes of the accumulators across a
// wait: it cannot see that the asynchronous MMAs write them.
__device__ __forceinline__ void fence_accumulators(float (&acc)[12][4]) {
#pragma unroll
  for (int i = 0; i < 12; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+f"(acc[i][j])::"memory");
}

// The 48 accumulators d[0][0] .. d[11][3] of an m64n96 wgmma as asm operands %0..%47,
// followed by the A fragment %48..%51 and the B descriptor %52.
#define ALEXCONV_WGMMA_D_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define ALEXCONV_WGMMA_D_OPERANDS(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])

// d += A (registers) x B (shared memory, via desc). `shape_types` names the instruction's
// shape and operand types; `scales` its immediate scale/transpose operands.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ALEXCONV_WGMMA_RS(shape_types, scales)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                  \
               "wgmma.mma_async.sync.aligned." shape_types " " ALEXCONV_WGMMA_D_REGS          \
               ", {%48, %49, %50, %51}, %52, p, " scales ";\n}\n"                           \
               : ALEXCONV_WGMMA_D_OPERANDS(d)                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))
#else
// Never launched: the host picks the wgmma engine only for sm_90a builds.
#define ALEXCONV_WGMMA_RS(shape_types, scales) __trap()
#endif

// d += A x B, both from shared memory (descriptors a and b).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ALEXCONV_WGMMA_SS(shape_types, scales)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                  \
               "wgmma.mma_async.sync.aligned." shape_types " " ALEXCONV_WGMMA_D_REGS          \
               ", %48, %49, p, " scales ";\n}\n"                                           \
               : ALEXCONV_WGMMA_D_OPERANDS(d)                                                \
               : "l"(a), "l"(b))
#else
#define ALEXCONV_WGMMA_SS(shape_types, scales) __trap()
#endif

__device__ __forceinline__ void bf16_m64n96k16_ss(float (&d)[12][4], uint64_t a, uint64_t b) {
  ALEXCONV_WGMMA_SS("m64n96k16.f32.bf16.bf16", "1, 1, 0, 0");
}
__device__ __forceinline__ void f16_m64n96k16_ss(float (&d)[12][4], uint64_t a, uint64_t b) {
  ALEXCONV_WGMMA_SS("m64n96k16.f32.f16.f16", "1, 1, 0, 0");
}
__device__ __forceinline__ void tf32_m64n96k8_ss(float (&d)[12][4], uint64_t a, uint64_t b) {
  ALEXCONV_WGMMA_SS("m64n96k8.f32.tf32.tf32", "1, 1");
}

__device__ __forceinline__ void bf16_m64n96k16(float (&d)[12][4], const uint32_t (&a)[4],
                                               uint64_t desc) {
  ALEXCONV_WGMMA_RS("m64n96k16.f32.bf16.bf16", "1, 1, 0");
}
__device__ __forceinline__ void f16_m64n96k16(float (&d)[12][4], const uint32_t (&a)[4],
                                              uint64_t desc) {
  ALEXCONV_WGMMA_RS("m64n96k16.f32.f16.f16", "1, 1, 0");
}
// tf32 has no transpose immediate.
__device__ __forceinline__ void tf32_m64n96k8(float (&d)[12][4], const uint32_t (&a)[4],
                                              uint64_t desc) {
  ALEXCONV_WGMMA_RS("m64n96k8.f32.tf32.tf32", "1, 1");
}

}  // namespace wgmma
}  // namespace cuda
}  // namespace alexconv
