// Autocast: like nn.Conv2d, conv1 runs in the autocast dtype (float16 or bfloat16)
// inside torch.autocast regions. Without these kernels a float32 model would stay in
// float32 there, and a float32 weight with a half input would be rejected.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "../compat.h"

#include "alexconv/conv1.h"

namespace alexconv {
namespace {

template <c10::DeviceType kDevice, c10::DispatchKey kAutocastKey>
at::Tensor conv1_autocast(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias, bool allow_tf32, int64_t padding,
                          bool relu) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  // cached_cast leaves alone what autocast would (float64, other devices, non-floats):
  // the op's checks then name it.
  const auto dtype = compat::autocast_dtype(kDevice);
  return conv1(at::autocast::cached_cast(dtype, input, kDevice),
               at::autocast::cached_cast(dtype, weight, kDevice),
               at::autocast::cached_cast(dtype, bias, kDevice), allow_tf32, padding, relu);
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, AutocastCPU, m) {
  m.impl("conv1", &alexconv::conv1_autocast<c10::DeviceType::CPU, c10::DispatchKey::AutocastCPU>);
}

TORCH_LIBRARY_IMPL(alexconv, AutocastCUDA, m) {
  m.impl("conv1", &alexconv::conv1_autocast<c10::DeviceType::CUDA, c10::DispatchKey::AutocastCUDA>);
}
