// The dispatch policy (dispatch.h). Host C++ only: the families answer what they can
// do with a problem (kernel_api.h), and the rules below, each with the measurement
// behind it (docs/perf-notes.md), decide.
#include "dispatch.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../conv1_geometry.h"

namespace alexconv {
namespace cuda {
namespace {

// ALEXCONV_CUDA_KERNEL: unset or "auto" picks per call; a kernel's name forces it
// (tests cover with it the paths a GPU or a problem size would not pick).
enum class Override { kAuto, kDirect, kMmaSync, kMmaSyncSplit, kWgmma, kS2d, kS2dMmaSync, kAten };

Override kernel_override() {
  static const Override choice = [] {
    const char* env = std::getenv("ALEXCONV_CUDA_KERNEL");
    const std::string v = env ? env : "auto";
    if (v == "auto") return Override::kAuto;
    if (v == "direct") return Override::kDirect;
    if (v == "mma_sync") return Override::kMmaSync;
    if (v == "mma_sync_split") return Override::kMmaSyncSplit;
    if (v == "wgmma") return Override::kWgmma;
    if (v == "s2d") return Override::kS2d;
    if (v == "s2d_mma_sync") return Override::kS2dMmaSync;
    if (v == "aten") return Override::kAten;
    TORCH_CHECK(false, "ALEXCONV_CUDA_KERNEL must be auto, direct, mma_sync, mma_sync_split, wgmma, s2d, "
                "s2d_mma_sync or aten, got '", v, "'");
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

Kernel mma_sync_kernel(IgemmFit fit) {
  return fit == IgemmFit::kHalfN ? Kernel::kMmaSyncN48 : fit == IgemmFit::kQuarterN ? Kernel::kMmaSyncN24
                                                                                     : Kernel::kMmaSync;
}

IgemmFit fit_of(Kernel kernel) {
  return kernel == Kernel::kMmaSyncN48 ? IgemmFit::kHalfN
         : kernel == Kernel::kMmaSyncN24 ? IgemmFit::kQuarterN
                                         : IgemmFit::kResident;
}

// Where the portable space-to-depth kernel beats the register-gather one off Hopper (perf-notes
// "The portable space-to-depth kernel"; H100 and H200 planning as sm_86 and sm_80): float32 with
// allow_tf32 everywhere (batch 256 at 224: as sm_86 0.34 ms against 0.58, as sm_80 0.28 against
// 0.58); 16 bits wherever the register gather loads elements one by one -- channels_last inputs
// (as sm_86 0.33 against 1.18, as sm_80 0.29 against 0.62) and rows not 4-byte aligned (227: as
// sm_80 0.28 against 0.66, as sm_86 against 1.30) -- and from NCHW rows where it loads column
// pairs: always in the 99 KB fit (as sm_86 0.26 against 0.34), from 32 tiles per SM in the Whole
// fit (A100; H200 as sm_80, batch 256: 224 0.254 against 0.262, 512 1.29 against 1.39; at 8-12
// tiles per SM, 224 and 256 batch 64, the register gather is 5-9% faster). Small batches keep the
// register gather, whose plan spreads them over more CTAs (the Hopper kernel's rule, s2d_preferred).
bool s2d_mma_sync_preferred(const Problem& p, const DeviceInfo& device) {
  const S2dMmaSyncFacts s2d = s2d_mma_sync_facts(p, device);
  constexpr int64_t kMinTilesPerSm = 4, kWholeNchwTilesPerSm = 32;
  if (s2d.groups == 0 || s2d.tiles < kMinTilesPerSm * device.sm_count) return false;
  // float32: with allow_tf32 everywhere; accurate (bf16x3) where the register gather splits the
  // channels over CTAs (163 KB and 99 KB parts: as sm_80 0.51 ms against 0.65, as sm_86 0.61
  // against 1.14); where it holds them all (Hopper-sized parts without sm_90a) it is as fast.
  if (p.dtype == DType::kFloat32) return p.allow_tf32 || igemm_fit(p, device) != IgemmFit::kResident;
  const bool channels_last = p.in_stride[1] == 1;
  if (channels_last || igemm_window_staging(p, device) == WindowStaging::kRegisters) return true;
  return s2d.pair_staging && (s2d.groups == 2 || s2d.tiles >= kWholeNchwTilesPerSm * device.sm_count);
}

// Where a float32 allow_tf32 call runs faster in the float32-accurate mode (dispatch_problem):
// GPUs planning a split fit of the register gather, where neither space-to-depth kernel takes
// the call, at up to 128 output pixels per SM (batch 1 at every size to 512x512, batch 2-4 at
// 224). The accurate split spreads a call over more CTAs on the 99 KB parts (four groups of 24
// channels against two of 48) and loads float32 rows as they are, where TF32's float16 words
// are converted first. H100 planning as sm_86, batch 1: 0.018-0.043 ms against 0.021-0.084
// (512: TF32 0.84x nn.Conv2d, accurate 1.98x); as sm_80 0.021-0.035 against 0.021-0.052 (512
// NCHW 5% slower, accepted); batch 8: TF32 faster at 224, 256 and 512 (perf-notes).
bool tf32_runs_accurate(const Problem& p, const DeviceInfo& device) {
  if (p.dtype != DType::kFloat32 || !p.allow_tf32) return false;
  constexpr int64_t kMaxPixelsPerSm = 128;
  if (p.batch * p.out_h * p.out_w > kMaxPixelsPerSm * device.sm_count) return false;
  const IgemmFit fit = igemm_fit(p, device);
  if (fit == IgemmFit::kNone || fit == IgemmFit::kResident || s2d_preferred(p, device) ||
      s2d_mma_sync_preferred(p, device)) {
    return false;
  }
  Problem accurate = p;
  accurate.allow_tf32 = false;
  return igemm_fit(accurate, device) != IgemmFit::kNone;
}

// The fastest path that can run the call: on Hopper the space-to-depth kernel where measured
// faster, else the register gather's wgmma kernel; elsewhere the portable space-to-depth kernel
// where measured faster, else the register gather's mma.sync kernel in the widest fit the GPU's
// shared memory takes; else ATen's convolution (as nn.Conv2d: 17-27x faster than the direct
// kernel on an H200, which stays the tests' plain reference).
Kernel auto_kernel(const Problem& p, const DeviceInfo& device) {
  if (s2d_preferred(p, device)) return Kernel::kS2d;
  const IgemmFit fit = igemm_fit(p, device);
  if (fit == IgemmFit::kResident && wgmma_available(device)) return Kernel::kWgmma;
  if (s2d_mma_sync_preferred(p, device)) return Kernel::kS2dMmaSync;
  if (fit != IgemmFit::kNone) return mma_sync_kernel(fit);
  return device.aten_available ? Kernel::kAten : Kernel::kDirect;
}

// "M.m" or "M.m:bytes" -> the GPU class to plan as.
GpuClass emulated_class(const std::string& v) {
  int major = -1, minor = -1;
  long long bytes = -1;
  char colon = 0;
  const int fields = std::sscanf(v.c_str(), "%d.%d%c%lld", &major, &minor, &colon, &bytes);
  const bool with_bytes = fields == 4 && colon == ':' && bytes > 0;
  TORCH_CHECK((fields == 2 || with_bytes) && major >= 0 && minor >= 0,
              "ALEXCONV_EMULATE_DEVICE must be a compute capability such as 8.6, optionally with the "
              "shared memory a block can opt into in bytes (8.6:101376), got '", v, "'");
  for (const GpuClass& c : kGpuClasses) {
    if (c.major == major && c.minor == minor) {
      return {major, minor, with_bytes ? size_t(bytes) : c.smem_per_block_optin, c.examples};
    }
  }
  TORCH_CHECK(with_bytes, "ALEXCONV_EMULATE_DEVICE=", v, ": compute capability ", major, ".", minor,
              " has no known shared-memory size; give it as ", major, ".", minor, ":BYTES");
  return {major, minor, size_t(bytes), ""};
}

}  // namespace

DeviceInfo device_info(const cudaDeviceProp& prop, bool aten_available) {
  DeviceInfo device;
  device.sm_count = prop.multiProcessorCount;
  device.major = prop.major;
  device.minor = prop.minor;
  device.max_smem_per_block_optin = prop.sharedMemPerBlockOptin;
  device.aten_available = aten_available;
  static const char* const emulate = std::getenv("ALEXCONV_EMULATE_DEVICE");
  if (emulate == nullptr || *emulate == 0) return device;
  const GpuClass as = emulated_class(emulate);
  // Planning with more shared memory than this GPU has would fail every launch. (The
  // kernels that run are this GPU's code: an emulated sm_86 runs the mma.sync kernels
  // of this build's sm_90a binary, with sm_86's shared-memory budget.)
  TORCH_CHECK(as.smem_per_block_optin <= device.max_smem_per_block_optin, "ALEXCONV_EMULATE_DEVICE=",
              emulate, " asks for ", as.smem_per_block_optin, " bytes of shared memory per block; this GPU (sm_",
              prop.major, prop.minor, ") has ", device.max_smem_per_block_optin);
  device.major = as.major;
  device.minor = as.minor;
  device.max_smem_per_block_optin = as.smem_per_block_optin;
  device.emulated = true;
  return device;
}

bool kernels_cover(int64_t out_channels, int64_t padding) {
  return padding == kPad && out_channels % 8 == 0 && out_channels >= 8 && out_channels <= kOutChannels;
}

Problem dispatch_problem(const Problem& p, const DeviceInfo& device) {
  Problem runs = p;
  if (kernel_override() == Override::kAuto && tf32_runs_accurate(p, device)) runs.allow_tf32 = false;
  return runs;
}

Kernel choose_kernel(const Problem& p, const DeviceInfo& device) {
  switch (kernel_override()) {
    case Override::kAuto: return auto_kernel(p, device);
    case Override::kDirect: return Kernel::kDirect;
    case Override::kAten:
      TORCH_CHECK(device.aten_available, "ALEXCONV_CUDA_KERNEL=aten asks for ATen's convolution, "
                  "which the caller said cannot run here");
      return Kernel::kAten;
    case Override::kS2d:
      TORCH_CHECK(s2d_facts(p, device).supported, "ALEXCONV_CUDA_KERNEL=s2d asks for a kernel this GPU (sm_",
                  device.major, device.minor, ") or build cannot run");
      return Kernel::kS2d;
    case Override::kS2dMmaSync:
      TORCH_CHECK(s2d_mma_sync_facts(p, device).groups > 0, "ALEXCONV_CUDA_KERNEL=s2d_mma_sync asks for a kernel this "
                  "GPU (sm_", device.major, device.minor, ") or build cannot run");
      return Kernel::kS2dMmaSync;
    case Override::kWgmma:
      TORCH_CHECK(igemm_fit_supported(p, device, IgemmFit::kResident) && wgmma_available(device),
                  "ALEXCONV_CUDA_KERNEL=wgmma asks for a kernel this GPU (sm_", device.major, device.minor,
                  ") or build cannot run");
      return Kernel::kWgmma;
    case Override::kMmaSync: {  // the mma.sync engine in the widest fit this GPU takes
      const IgemmFit fit = igemm_fit(p, device);
      TORCH_CHECK(fit != IgemmFit::kNone, "ALEXCONV_CUDA_KERNEL=mma_sync asks for a kernel this GPU (sm_",
                  device.major, device.minor, ") or build cannot run");
      return mma_sync_kernel(fit);
    }
    case Override::kMmaSyncSplit: {  // the narrowest split the dtype has: the 99 KB parts' kernel
      const IgemmFit fit = igemm_fit_supported(p, device, IgemmFit::kQuarterN) ? IgemmFit::kQuarterN : IgemmFit::kHalfN;
      TORCH_CHECK(igemm_fit_supported(p, device, fit), "ALEXCONV_CUDA_KERNEL=mma_sync_split asks for a kernel "
                  "this GPU (sm_", device.major, device.minor, ") or build cannot run");
      return mma_sync_kernel(fit);
    }
  }
  return Kernel::kDirect;
}

cudaError_t launch(Kernel kernel, const Problem& p, DeviceInfo device, cudaStream_t stream) {
  switch (kernel) {
    case Kernel::kDirect: return launch_conv1_direct(p, stream);
    case Kernel::kS2d: return launch_conv1_s2d(p, device, stream);
    case Kernel::kS2dMmaSync: return launch_conv1_s2d_mma_sync(p, device, stream);
    case Kernel::kMmaSync:
    case Kernel::kMmaSyncN48:
    case Kernel::kMmaSyncN24:
    case Kernel::kWgmma:
      device.allow_wgmma = kernel == Kernel::kWgmma;
      return launch_conv1_igemm(p, device, fit_of(kernel), stream);
    case Kernel::kAten: break;  // not ours: the caller runs it
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
