// The direct kernel: one thread per output value, float accumulation, any
// strides. It is the portable path for GPUs whose shared memory cannot hold the
// implicit GEMM's working set, and the plainest statement of what the op computes.
#include "../launch_plan.h"

#include <algorithm>

#include "../../conv1_geometry.h"
#include "../common/dtype.cuh"
#include "direct.cuh"

namespace alexconv {
namespace cuda {
namespace {

template <DType T>
__global__ void conv1_direct_kernel(const Problem p, int64_t total) {
  using S = typename Storage<T>::type;
  S* out = static_cast<S*>(p.output);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    // W fastest, so neighbouring threads read neighbouring input columns.
    const int64_t ox = i % p.out_w;
    const int64_t oy = (i / p.out_w) % p.out_h;
    const int64_t co = (i / (p.out_w * p.out_h)) % p.out_channels;
    const int64_t n = i / (p.out_w * p.out_h * p.out_channels);
    const float acc = direct_output<T>(p, n, co, oy, ox);
    out[n * p.out_stride[0] + co * p.out_stride[1] + oy * p.out_stride[2] +
        ox * p.out_stride[3]] = relu_output<T>(acc, p.relu);
  }
}

template <DType T>
cudaError_t launch_typed(const Problem& p, cudaStream_t stream) {
  const int64_t total = p.batch * p.out_channels * p.out_h * p.out_w;
  if (total == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  // Grid-stride loop: cap the grid; every index stays int64.
  const int64_t blocks = std::min<int64_t>((total + kBlock - 1) / kBlock, int64_t(1) << 20);
  conv1_direct_kernel<T><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(p, total);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

}  // namespace

// Any call: float accumulation, whatever allow_tf32 says (no tensor cores: `mode` unused).
LaunchPlan plan_direct(const Problem& p) {
  LaunchPlan plan;  // no device facts: one thread per output
  plan.kernel = Kernel::kDirect;
  plan.problem = p;
  plan.tiles = p.batch * p.out_channels * p.out_h * p.out_w;  // one thread per output
  return plan;
}

cudaError_t launch_direct(const LaunchPlan& plan, cudaStream_t stream) {
  const Problem& p = plan.problem;
  switch (p.dtype) {
    case DType::kFloat32: return launch_typed<DType::kFloat32>(p, stream);
    case DType::kFloat16: return launch_typed<DType::kFloat16>(p, stream);
    case DType::kBFloat16: return launch_typed<DType::kBFloat16>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
