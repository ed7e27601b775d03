// The producers' votes on tiles to store exactly, shared by the kernels that guard a float16
// operand's range: the space-to-depth kernel (s2d/, every mode) and the register gather's
// float32-as-float16 words (igemm/, mma::Float32AsHalf).
#pragma once

#include <cstdint>

namespace alexconv {
namespace cuda {

// What a producer warp saw in a tile's windows, one byte per warp in the ring's `votes` word.
// A tile is stored exactly (its kernel's store_exact_tile) when a window holds Inf or NaN --
// or, for float32 multiplied as fp16, a value fp16 cannot hold (rounded to Inf), or nothing of
// 2^-10 or more but something nonzero: fp16's subnormals below 2^-14 keep fewer bits than
// TF32, which only matters where nothing larger dominates the outputs. Zeros alone are exact
// in fp16.
struct TileVotes {
  static constexpr uint32_t kExact = 1, kLarge = 2, kNonzero = 4;
  static constexpr uint32_t kEveryWarp = 0x01010101u;
  // A thread's bits from the largest |x| it saw in float32 (NaN never seen: fmaxf drops it, and
  // it stays in its own outputs; Inf is at or past 65520, which float16 rounds to Inf).
  __device__ static uint32_t of_largest(float top) {
    return (top >= 65520.f ? kExact : 0) | (top >= 0x1p-10f ? kLarge : 0) | (top > 0.f ? kNonzero : 0);
  }
  __device__ static bool exact(uint32_t votes) {
    return (votes & kExact * kEveryWarp) != 0 ||
           ((votes & kNonzero * kEveryWarp) != 0 && (votes & kLarge * kEveryWarp) == 0);
  }
};

}  // namespace cuda
}  // namespace alexconv
