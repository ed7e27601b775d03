// The dispatch policy (dispatch.h). Host C++ only: the families answer what they can
// do with a problem (kernel_api.h), and the rules below, each with the measurement
// behind it (docs/perf-notes.md), decide.
#include "dispatch.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

namespace alexconv {
namespace cuda {
namespace {

// ALEXCONV_CUDA_KERNEL: unset or "auto" picks per call; a kernel's name forces it
// (tests cover with it the paths a GPU or a problem size would not pick).
enum class Override { kAuto, kDirect, kMmaSync, kWgmma, kS2d };

Override kernel_override() {
  static const Override choice = [] {
    const char* env = std::getenv("ALEXCONV_CUDA_KERNEL");
    const std::string v = env ? env : "auto";
    if (v == "auto") return Override::kAuto;
    if (v == "direct") return Override::kDirect;
    if (v == "mma_sync") return Override::kMmaSync;
    if (v == "wgmma") return Override::kWgmma;
    if (v == "s2d") return Override::kS2d;
    TORCH_CHECK(false, "ALEXCONV_CUDA_KERNEL must be auto, direct, mma_sync, wgmma or s2d, got '", v,
                "'");
    return Override::kAuto;
  }();
  return choice;
}

// Where the space-to-depth kernel beats the register-gather one (H200; perf-notes
// v13-v15 for contiguous inputs at batch >= 64, v17 for small batches and other strides).
bool s2d_preferred(const Problem& p, const DeviceInfo& device) {
  if (!device.allow_wgmma) return false;
  const S2dFacts s2d = s2d_facts(p, device);
  if (!s2d.supported) return false;
  // What the register-gather engine would do instead.
  const WindowStaging other = igemm_window_staging(p, device);
  const bool unit_stride = p.in_stride[3] == 1;
  // Its tiles are 192 pixels; small batches keep the other engine, whose plan spreads
  // them over more CTAs -- unless it stages element by element (16-bit loads, float32
  // 4-byte copies) where this kernel copies whole rows: 16-bit unit-stride rows not
  // 4-byte aligned (227; 0.52-0.61x the time at batch 1-8) and channels_last pixels
  // (perf-notes v31, batch 1-16 at 224, 227, 256: 16-bit 0.50-0.78x, TF32 0.66-0.97x but
  // for 1.08x at 224 batch 8).
  constexpr int64_t kMinTilesPerSm = 4;
  if (s2d.tiles < kMinTilesPerSm * device.sm_count) {
    if (p.dtype == DType::kFloat32) return p.allow_tf32 && s2d.pixel_spans;
    return other == WindowStaging::kRegisters && (unit_stride || s2d.pixel_spans);
  }
  // float32 with allow_tf32: multiplied as fp16 here, TF32 there (perf-notes v21).
  if (p.dtype == DType::kFloat32 && p.allow_tf32) return true;
  // float32: wherever the other engine has no TMA copy: unit-stride rows it copies
  // otherwise (227, 512), and other W strides (channels_last: 0.83x the time since
  // both engines store channels-last outputs along channels, perf-notes v23).
  // With TMA (224, 256) the other engine is faster.
  if (p.dtype == DType::kFloat32) return other != WindowStaging::kTma;
  // 16-bit: where this kernel stages by TMA (224, 256, 512), or the other one loads
  // elements (227, channels_last: 0.82-0.85x) or 4-byte pairs (0.95x).
  return other == WindowStaging::kRegisters || other == WindowStaging::kCopy4 || s2d.tma_boxes;
}

// The fastest path that can run the call: the space-to-depth kernel where measured
// faster, else the register-gather implicit GEMM where its working set fits in shared
// memory (wgmma on Hopper, mma.sync elsewhere), else the direct kernel.
Kernel auto_kernel(const Problem& p, const DeviceInfo& device) {
  if (s2d_preferred(p, device)) return Kernel::kS2d;
  if (igemm_supported(p, device)) return wgmma_available(device) ? Kernel::kWgmma : Kernel::kMmaSync;
  return Kernel::kDirect;
}

}  // namespace

const char* kernel_name(Kernel kernel) {
  switch (kernel) {
    case Kernel::kDirect: return "direct";
    case Kernel::kMmaSync: return "mma_sync";
    case Kernel::kWgmma: return "wgmma";
    case Kernel::kS2d: return "s2d";
  }
  return "?";
}

DeviceInfo device_info(const cudaDeviceProp& prop) {
  DeviceInfo device;
  device.sm_count = prop.multiProcessorCount;
  device.major = prop.major;
  device.minor = prop.minor;
  device.max_smem_per_block_optin = prop.sharedMemPerBlockOptin;
  return device;
}

Kernel choose_kernel(const Problem& p, const DeviceInfo& device) {
  switch (kernel_override()) {
    case Override::kAuto: return auto_kernel(p, device);
    case Override::kDirect: return Kernel::kDirect;
    case Override::kS2d:
      TORCH_CHECK(s2d_facts(p, device).supported, "ALEXCONV_CUDA_KERNEL=s2d asks for a kernel this GPU (sm_",
                  device.major, device.minor, ") or build cannot run");
      return Kernel::kS2d;
    case Override::kMmaSync:
    case Override::kWgmma: {
      const bool wgmma = kernel_override() == Override::kWgmma;
      TORCH_CHECK(igemm_supported(p, device) && (!wgmma || wgmma_available(device)),
                  "ALEXCONV_CUDA_KERNEL=", wgmma ? "wgmma" : "mma_sync",
                  " asks for a kernel this GPU (sm_", device.major, device.minor, ") or build cannot run");
      return wgmma ? Kernel::kWgmma : Kernel::kMmaSync;
    }
  }
  return Kernel::kDirect;
}

cudaError_t launch(Kernel kernel, const Problem& p, DeviceInfo device, cudaStream_t stream) {
  switch (kernel) {
    case Kernel::kDirect: return launch_conv1_direct(p, stream);
    case Kernel::kS2d: return launch_conv1_s2d(p, device, stream);
    case Kernel::kMmaSync:
    case Kernel::kWgmma:
      device.allow_wgmma = kernel == Kernel::kWgmma;
      return launch_conv1_igemm(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
