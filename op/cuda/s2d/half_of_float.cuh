// float32 with allow_tf32 in the space-to-depth kernel: the operand mode that
// multiplies float32 as float16, and the power-of-two weight scale that keeps the
// weights inside float16's range.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../common/operand_modes.cuh"
#include "../common/weight_packing.cuh"
#include "../common/weight_scale.cuh"
#include "../kernel_api.h"

namespace alexconv {
namespace cuda {
namespace mma {

// allow_tf32 in the space-to-depth kernel: float32 inputs and weights rounded to
// float16, whose 10-bit mantissa is TF32's, at twice TF32's tensor rate and with half
// its operand bytes (cuBLAS calls this CUBLAS_COMPUTE_32F_FAST_16F). float16's
// narrow range is the kernel's to guard: weights come scaled by a power of two
// (pack_channel), tiles whose inputs overflow float16 or all sit near its subnormals
// are computed exactly (s2d.cu).
struct HalfOfFloat {
  static constexpr bool kIsBf16 = false;
  static constexpr bool kScalesWeights = true;  // see half_weight_scale
  using Raw = float;
  static constexpr int kWgBlocks = 1;
  template <class W>
  __device__ static void wg_words(const W& w, int n, int unit, uint32_t (&words)[kWgBlocks]) {
    words[0] = pack_half2(w(n, 2 * unit), w(n, 2 * unit + 1));
  }
};

}  // namespace mma

}  // namespace cuda
}  // namespace alexconv
