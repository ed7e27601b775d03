// The dispatch policy (dispatch.h). Host C++ only: each family plans the call
// (launch_plan.h), and the rules below, each with the measurement behind it
// (docs/perf-notes.md), pick one of those plans.
#include "dispatch.h"

#include <c10/util/Exception.h>
#include <cuda.h>  // CUDA_VERSION: the toolkit the kernels were built by

#include <cstdio>
#include <cstdlib>
#include <optional>
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

// What each family would do with the call: its plan, or none where it cannot run it. The
// register gather is planned in its widest fit, on wgmma where it has Hopper's engine.
struct Candidates {
  std::optional<LaunchPlan> s2d, gather, portable;  // s2d/ on Hopper, igemm/, s2d_mma_sync/
};

// The register gather in the widest fit this GPU takes; Whole on wgmma where it has it and
// `wgmma` allows.
std::optional<LaunchPlan> widest_gather(const Problem& p, const DeviceInfo& device, bool wgmma = true) {
  for (Fit fit : {Fit::kWhole, Fit::kHalves, Fit::kQuarters}) {
    const bool on_wgmma = wgmma && fit == Fit::kWhole && wgmma_available(device);
    if (auto plan = plan_igemm(p, device, fit, on_wgmma)) return plan;
  }
  return std::nullopt;
}

Candidates candidates(const Problem& p, const DeviceInfo& device) {
  return {plan_s2d(p, device), widest_gather(p, device), plan_s2d_mma_sync(p, device)};
}

// Where the space-to-depth kernel beats the register-gather one (H200). The measurements behind
// every rule below: docs/perf-notes.md, "The measurements behind the code's choices".
bool s2d_preferred(const Problem& p, const DeviceInfo& device, const Candidates& c) {
  if (!c.s2d) return false;
  if (!c.gather) return true;  // the only one of ours that can
  const LaunchPlan& s2d = *c.s2d;
  const Staging other = c.gather->staging;
  const bool unit_stride = p.in_stride[3] == 1;
  // Its tiles are 192 pixels; small batches keep the other engine, whose plan spreads them
  // over more CTAs -- unless it stages element by element (16-bit loads, float32 4-byte
  // copies) where this kernel copies whole rows: 16-bit unit-stride rows not 4-byte aligned
  // (227) and channels_last pixels.
  constexpr int64_t kMinTilesPerSm = 4;
  const bool pixel_spans = s2d.staging == Staging::kPixelSpans;
  if (s2d.tiles < kMinTilesPerSm * device.sm_count) {
    if (p.dtype == DType::kFloat32) return p.allow_tf32 && pixel_spans;
    return other == Staging::kLoads && (unit_stride || pixel_spans);
  }
  // float32 with allow_tf32: multiplied as fp16 here, TF32 there.
  if (p.dtype == DType::kFloat32 && p.allow_tf32) return true;
  // float32: wherever the other engine has no TMA copy: unit-stride rows it copies otherwise
  // (227, 512), and other W strides (channels_last, both engines storing channels-last
  // outputs along channels). With TMA (224, 256) the other engine is faster.
  if (p.dtype == DType::kFloat32) return other != Staging::kTma;
  // 16-bit: where this kernel stages by TMA (224, 256, 512), or the other one loads elements
  // (227, channels_last) or 4-byte pairs.
  return other == Staging::kLoads || other == Staging::kCopy4 || s2d.staging == Staging::kTma;
}

// Where the portable space-to-depth kernel beats the register-gather one off Hopper (H100 and
// H200 planning as sm_86 and sm_80): float32 with allow_tf32 everywhere; 16 bits wherever the
// register gather loads elements one by one -- channels_last inputs and rows not 4-byte
// aligned (227) -- and from NCHW rows where it loads column pairs: always in the Halves fit,
// from 32 tiles per SM in the Whole fit (A100; at 8-12 tiles per SM the register gather is
// faster). Small batches keep the register gather, whose plan spreads them over more CTAs (the
// Hopper kernel's rule, s2d_preferred).
//
// A CUDA 11.8 build's kernels are not CUDA 13's (docs/perf-notes.md, "CUDA 11.8"): its pair
// producers run longer, its register gather's float32 kernels slower. Where the register gather
// holds every channel (A100 in 16 bits, Hopper without sm_90a) that turns two rules around: 16-bit
// NCHW pairs in the Whole fit keep the register gather, and float32 accurate takes this kernel.
constexpr bool kBuiltByCuda11 = CUDA_VERSION < 12000;

bool s2d_mma_sync_preferred(const Problem& p, const DeviceInfo& device, const Candidates& c) {
  constexpr int64_t kMinTilesPerSm = 4, kWholeNchwTilesPerSm = 32;
  if (!c.portable) return false;
  if (!c.gather) return true;  // the only one of ours that can (odd paddings)
  if (c.portable->tiles < kMinTilesPerSm * device.sm_count) return false;
  const LaunchPlan& portable = *c.portable;
  const bool gather_holds_all = c.gather->fit == Fit::kWhole;
  // float32: with allow_tf32 everywhere; accurate (bf16x3) where the register gather splits the
  // channels over CTAs (163 KB and 99 KB parts); where it holds them all (Hopper-sized parts
  // without sm_90a) it is as fast, but for a CUDA 11.8 build's.
  if (p.dtype == DType::kFloat32) return p.allow_tf32 || !gather_holds_all || kBuiltByCuda11;
  const bool channels_last = p.in_stride[1] == 1;
  if (channels_last || c.gather->staging == Staging::kLoads) return true;
  if (portable.staging != Staging::kPairs) return false;
  if (portable.fit == Fit::kHalves) return true;
  return !kBuiltByCuda11 && portable.tiles >= kWholeNchwTilesPerSm * device.sm_count;
}

// Where a float32 allow_tf32 call runs faster in the float32-accurate mode: GPUs planning a
// split fit of the register gather, where neither space-to-depth kernel takes the call (auto_plan
// asks after both rules), at up to 128 output pixels per SM (batch 1 at every size to 512x512,
// batch 2-4 at 224). The accurate split spreads a call over more CTAs on the 99 KB parts (four
// groups of 24 channels against two of 48) and loads float32 rows as they are, where TF32's
// float16 words are converted first (at batch 8 TF32 is faster again).
// Returns the accurate call's plan where the rule applies.
std::optional<LaunchPlan> tf32_runs_accurate(const Problem& p, const DeviceInfo& device, const Candidates& c) {
  if (p.dtype != DType::kFloat32 || !p.allow_tf32) return std::nullopt;
  constexpr int64_t kMaxPixelsPerSm = 128;
  if (p.batch * p.out_h * p.out_w > kMaxPixelsPerSm * device.sm_count) return std::nullopt;
  if (!c.gather || c.gather->fit == Fit::kWhole) return std::nullopt;
  Problem accurate = p;
  accurate.allow_tf32 = false;
  return widest_gather(accurate, device);
}

LaunchPlan aten_plan(const Problem& p) {
  LaunchPlan plan;
  plan.kernel = Kernel::kAten;
  plan.problem = p;
  return plan;
}

LaunchPlan chosen(LaunchPlan plan, const char* rule) {
  plan.rule = rule;
  return plan;
}

// The fastest path that can run the call: on Hopper the space-to-depth kernel where measured
// faster, else the register gather's wgmma kernel; elsewhere the portable space-to-depth kernel
// where measured faster, else the register gather's mma.sync kernel in the widest fit the GPU's
// shared memory takes; else ATen's convolution (as nn.Conv2d, far faster than the direct
// kernel, which stays the tests' plain reference).
LaunchPlan auto_plan(const Problem& p, const DeviceInfo& device) {
  const Candidates c = candidates(p, device);
  if (s2d_preferred(p, device, c)) return chosen(*c.s2d, "s2d_preferred");
  if (c.gather && c.gather->kernel == Kernel::kWgmma) return chosen(*c.gather, "wgmma: Whole fit on Hopper");
  if (s2d_mma_sync_preferred(p, device, c)) return chosen(*c.portable, "s2d_mma_sync_preferred");
  if (std::optional<LaunchPlan> accurate = tf32_runs_accurate(p, device, c)) {
    return chosen(*accurate, "tf32_runs_accurate");
  }
  if (c.gather) return chosen(*c.gather, "mma_sync: the widest fit");
  return device.aten_available ? chosen(aten_plan(p), "no kernel of ours runs the call")
                               : chosen(plan_direct(p), "no kernel of ours, no ATen");
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
  return padding >= 0 && padding <= kMaxPad && out_channels >= 1 && out_channels <= kOutChannels &&
         (kAnyChannelCount || out_channels % 8 == 0);
}

LaunchPlan plan_call(const Problem& p, const DeviceInfo& device) {
  const auto forced = [&](std::optional<LaunchPlan> plan, const char* name) {
    TORCH_CHECK(plan.has_value(), "ALEXCONV_CUDA_KERNEL=", name, " asks for a kernel this GPU (sm_", device.major,
                device.minor, ") or build cannot run");
    return chosen(*plan, "ALEXCONV_CUDA_KERNEL");
  };
  const Override override = kernel_override();
  // The register gather's kernels take even paddings only (plan_igemm): forced, they leave odd
  // ones to auto, as every forced kernel leaves the geometries outside kernels_cover to ATen.
  const bool gather_forced =
      override == Override::kMmaSync || override == Override::kMmaSyncSplit || override == Override::kWgmma;
  if (gather_forced && p.pad % 2 != 0) return auto_plan(p, device);
  switch (override) {
    case Override::kAuto: return auto_plan(p, device);
    case Override::kDirect: return chosen(plan_direct(p), "ALEXCONV_CUDA_KERNEL");
    case Override::kAten:
      TORCH_CHECK(device.aten_available, "ALEXCONV_CUDA_KERNEL=aten asks for ATen's convolution, "
                  "which the caller said cannot run here");
      return chosen(aten_plan(p), "ALEXCONV_CUDA_KERNEL");
    case Override::kS2d: return forced(plan_s2d(p, device), "s2d");
    case Override::kS2dMmaSync: return forced(plan_s2d_mma_sync(p, device), "s2d_mma_sync");
    case Override::kWgmma: return forced(plan_igemm(p, device, Fit::kWhole, /*wgmma=*/true), "wgmma");
    case Override::kMmaSync:  // the mma.sync engine in the widest fit this GPU takes
      return forced(widest_gather(p, device, /*wgmma=*/false), "mma_sync");
    case Override::kMmaSyncSplit: {  // the narrowest split the dtype has: the 99 KB parts' kernel
      std::optional<LaunchPlan> plan = plan_igemm(p, device, Fit::kQuarters, /*wgmma=*/false);
      if (!plan) plan = plan_igemm(p, device, Fit::kHalves, /*wgmma=*/false);
      return forced(plan, "mma_sync_split");
    }
  }
  return chosen(plan_direct(p), "");
}

}  // namespace cuda
}  // namespace alexconv
