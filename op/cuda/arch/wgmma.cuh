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

// A no-swizzle, K-major shared-memory operand's descriptor (8-row x 16-byte core
// matrices, `leading` bytes apart along K, `stride` bytes apart along M or N), kept
// as its two 32-bit halves. Operands move in steps of 16 bytes (taps, K steps,
// planes): the start-address field (bits 0-13, address / 16) sits alone in the low
// half and shared memory ends below 256 KB, so a step is one 32-bit add. Rebuilding
// the descriptor from each address instead costs a mask, a shift and an OR per half
// per wgmma, which ptxas does not fold (~12 instructions a wgmma; docs/perf-notes.md, "Versions").
struct Operand {
  uint32_t lo, hi;
  __device__ __forceinline__ static uint32_t start_field(uint32_t smem_addr) {
    return (smem_addr & 0x3FFFF) >> 4;
  }
  __device__ __forceinline__ static Operand from_start(uint32_t start, uint32_t leading,
                                                       uint32_t stride) {
    return {start | (leading >> 4) << 16, stride >> 4};
  }
  __device__ __forceinline__ static Operand at_address(uint32_t smem_addr, uint32_t leading,
                                                       uint32_t stride) {
    return from_start(start_field(smem_addr), leading, stride);
  }
  // The descriptor of the operand `units` x 16 bytes further on.
  __device__ __forceinline__ uint64_t at(uint32_t units) const {
    return (uint64_t(hi) << 32) | (lo + units);
  }
};

// B blocks (96 channels x 32 bytes of K each: core matrices of two K halves
// kLeadingBytes apart, 8-channel groups kStrideBytes apart) from `smem_addr` on;
// block i is at(i * kBlockUnits).
constexpr uint32_t kBlockUnits = kBlockBytes / 16;
__device__ __forceinline__ Operand blocks(uint32_t smem_addr) {
  return Operand::at_address(smem_addr, kLeadingBytes, kStrideBytes);
}
__device__ __forceinline__ Operand blocks_from_start(uint32_t start) {
  return Operand::from_start(start, kLeadingBytes, kStrideBytes);
}

// The start fields of two operands in one word, read from lane 0. Through the
// shuffle ptxas knows them warp-uniform and builds every descriptor from them in
// uniform registers, where wgmma reads descriptors. (B's address alone is the
// shared-memory base plus a constant: its shuffle folds away, the descriptors then
// live in vector registers and each wgmma pays two R2UR moves.)
__device__ __forceinline__ uint32_t uniform_starts(uint32_t a_addr, uint32_t b_addr) {
  return __shfl_sync(0xffffffffu,
                     Operand::start_field(a_addr) | Operand::start_field(b_addr) << 16, 0);
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
