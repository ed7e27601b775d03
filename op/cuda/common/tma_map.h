// The input's TMA descriptor (Hopper tensor copies), shared by both implicit-GEMM
// kernels: a kernel parameter of each (read by their TMA-staged variants only).
// Encoded on the host through the runtime's driver entry point (no link to the
// driver library). CUDA 11 has no TMA: a stand-in of its size keeps the sm_80
// kernels buildable there.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../kernel_api.h"

namespace alexconv {
namespace cuda {

#if CUDA_VERSION >= 12000
using WindowMap = CUtensorMap;
#else
struct alignas(64) WindowMap {
  unsigned long long opaque[16];
};
#endif

// Describes the input (W, H, channel, image; any strides the driver accepts) for
// copies of cols x rows boxes of one channel of one image, zeros outside the input.
// False where this build, the driver or the strides do not allow it.
bool encode_window_map(const Problem& p, int64_t cols, int64_t rows, WindowMap& map);

// The same boxes where they are wider than TMA's 256 elements per dimension: each
// row is cut into 16-byte units (dimensions: element in unit, unit, H, channel,
// image), and a box of cols / (elements per unit) units still lands as dense rows of
// cols elements. Needs whole units per row (W a multiple of 8 for 16-bit elements, 4
// for float32), or a unit would reach past the row.
bool encode_window_map_in_units(const Problem& p, int64_t cols, int64_t rows, WindowMap& map);

}  // namespace cuda
}  // namespace alexconv
