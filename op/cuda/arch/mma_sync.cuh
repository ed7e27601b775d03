// Warp-level tensor-core MMAs (mma.sync, sm_80+) with float32 accumulators, in the
// m16n8k16 (bf16, fp16) and m16n8k8 (tf32) shapes, TF32 rounding, and the shared-memory
// load of four 8x8 16-bit matrices (ldmatrix) that delivers operands in their layout.
#pragma once

#include <cstdint>

namespace alexconv {
namespace cuda {
namespace mma {

__device__ __forceinline__ void bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                           uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void f16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void tf32_1688(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cvt.rna rounds a finite |x| from 0x1.ffep127 (bits 0x7f7ff000) up to Inf, where F.conv2d's
// float32 product stays finite: keep TF32's largest finite value (0x7f7fe000) there instead.
// Inf and NaN (magnitudes from 0x7f800000) fall outside the window and pass unchanged.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  const uint32_t magnitude = __float_as_uint(x) & 0x7fffffffu;
  return magnitude - 0x7f7ff000u < 0x1000u ? r - 0x2000u : r;
}

// Four 8x8 matrices of 16-bit values: lanes 8i..8i+7 give the 16-byte rows of matrix i, and
// r[i] is this lane's pair of it (row lane / 4, columns 2 (lane % 4) and +1) -- an m16n8k16
// A fragment (matrices: rows 0-7 and 8-15 of k 0-7, then of k 8-15) or two B fragments.
// volatile: it stays after the barrier wait that publishes the rows.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

}  // namespace mma
}  // namespace cuda
}  // namespace alexconv
