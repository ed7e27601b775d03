// The input's TMA descriptors (common/tma_map.h), encoded on the host through the
// runtime's driver entry point: no link to the driver library.
#include "tma_map.h"

#include <cuda.h>

#if CUDA_VERSION >= 12000
#include <cudaTypedefs.h>  // the driver's tensor-map encoder, reached through the runtime
#endif

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../kernel_api.h"

namespace alexconv {
namespace cuda {

#if defined(ALEXCONV_BUILT_FOR_SM90A)
namespace {
// cuTensorMapEncodeTiled, through the runtime (no link to the driver library);
// null where the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                             cudaEnableDefault, &found);
#else
    const cudaError_t err =
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // the launch check must not report this
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A tiled map of the input's channel planes, zeros outside: dims/box innermost first,
// the last three dimensions always H, channel and image.
template <int kRank>
bool encode_input_map(const Problem& p, const cuuint64_t (&dims)[kRank],
                      const cuuint64_t (&strides)[kRank - 1], const cuuint32_t (&box)[kRank],
                      WindowMap& map) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  // The driver refuses an empty dimension (an empty batch: the op launches nothing for one, the
  // harness plans it) with an error compute-sanitizer reports; no map then, without asking.
  for (int i = 0; i < kRank; ++i) {
    if (dims[i] == 0) return false;
  }
  cuuint32_t element_strides[kRank];
  for (int i = 0; i < kRank; ++i) element_strides[i] = 1;
  const CUresult status = encode(
      &map, p.dtype == DType::kFloat32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16,
      kRank, const_cast<void*>(p.input), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // zeros outside the input
  return status == CUDA_SUCCESS;
}
}  // namespace
#endif

bool encode_window_map(const Problem& p, int64_t cols, int64_t rows, WindowMap& map) {
#if defined(ALEXCONV_BUILT_FOR_SM90A)
  const cuuint64_t elem = cuuint64_t(element_bytes(p.dtype));
  const cuuint64_t dims[4] = {cuuint64_t(p.in_w), cuuint64_t(p.in_h), cuuint64_t(kInChannels),
                              cuuint64_t(p.batch)};
  const cuuint64_t strides[3] = {cuuint64_t(p.in_stride[2]) * elem,
                                 cuuint64_t(p.in_stride[1]) * elem,
                                 cuuint64_t(p.in_stride[0]) * elem};
  const cuuint32_t box[4] = {cuuint32_t(cols), cuuint32_t(rows), 1, 1};
  return encode_input_map<4>(p, dims, strides, box, map);
#else
  (void)p, (void)cols, (void)rows, (void)map;
  return false;
#endif
}

bool encode_window_map_in_units(const Problem& p, int64_t cols, int64_t rows, WindowMap& map) {
#if defined(ALEXCONV_BUILT_FOR_SM90A)
  const int64_t elem = element_bytes(p.dtype);
  const int64_t unit = 16 / elem;  // elements per 16 bytes
  if (p.in_w % unit != 0 || cols % unit != 0) return false;
  const cuuint64_t dims[5] = {cuuint64_t(unit), cuuint64_t(p.in_w / unit), cuuint64_t(p.in_h),
                              cuuint64_t(kInChannels), cuuint64_t(p.batch)};
  const cuuint64_t strides[4] = {cuuint64_t(unit * elem), cuuint64_t(p.in_stride[2] * elem),
                                 cuuint64_t(p.in_stride[1] * elem), cuuint64_t(p.in_stride[0] * elem)};
  const cuuint32_t box[5] = {cuuint32_t(unit), cuuint32_t(cols / unit), cuuint32_t(rows), 1, 1};
  return encode_input_map<5>(p, dims, strides, box, map);
#else
  (void)p, (void)cols, (void)rows, (void)map;
  return false;
#endif
}

}  // namespace cuda
}  // namespace alexconv
