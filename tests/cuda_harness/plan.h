// The harness's plan: the shapes, modes and device classes it runs, the launches each takes
// (as dispatch.cpp would launch them), the kernels' Problem for a case, and its inputs. Shared by
// the GPU run, --list and --self-test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda/catalog.h"
#include "cuda/kernel_api.h"
#include "cuda/launch_plan.h"
#include "reference.h"

namespace harness {

using namespace alexconv::cuda;  // kernel_api.h, launch_plan.h: Problem, DeviceInfo, the plans

// ---- What runs: shapes x layouts, modes, and the launches each device class takes.

// One input configuration. Layouts: "nchw", "nhwc" (channels_last), "wstride2" (input only).
// bias_scale 0: no bias; 64: a bias far larger than the sum (accumulators start at the bias).
// channels: the weight's output channels (Problem::out_channels: 1 to 96);
// relu: fused in the epilogue (Problem::relu); pad: Problem::pad.
struct Group {
  int64_t n, h, w;
  const char *in_kind, *out_kind, *w_kind;
  double bias_scale;
  int64_t channels = 96;
  bool relu = false;
  int64_t pad = 2;
};
// Small ragged shapes (one-past tile and stride boundaries, multi-strip plans, 16-bit boxes
// past 256 columns; tests/test_correctness.py's reasons), one batch-8 224x224, channels_last
// input and output, a non-unit column stride, a channels_last weight. Then other channel counts
// and relu (issue 46): torchvision's AlexNet (64 channels, relu) at 224 wide, whose 16-bit rows
// are whole 16-byte units (TMA boxes, 16-byte copies); one n-tile (8) into channels_last, where a
// 16-bit pixel is one 16-byte store; 40 (Halves' first group only, Quarters' two of four) with
// relu and no bias, where relu zeroes about half the outputs; 88 (every split group, the last
// partly) with a channels_last weight; 96 with relu. The CPU reference costs 363 MACs per
// output: about 5.5e9 MACs in all, well under 60 s on 16 cores. Then the other paddings (issue
// 66): the original AlexNet's 0 at 227 with relu (a 16-bit row not 4-byte aligned) and at 224
// into channels_last; 0 at its smallest input (11x11) and 5 at its (1x1: every tap but one is
// padding); the odd ones (1, 3, 5), which the register gather leaves to the space-to-depth
// kernels, on ragged shapes in both layouts; 4 on a multi-strip width. And counts that are no
// multiple of 8 (the last n-tile stored channel by channel): 1; 17 into channels_last (not
// pixel-major: along out_stride[1]); 12 from channels_last; 95 at padding 0 with relu. Odd
// paddings on rows of whole 16-byte units, where even ones take TMA boxes (odd ones must not:
// their windows start at odd elements, s2d.cu tma_box).
inline const Group kGroups[] = {
    {1, 7, 7, "nchw", "nchw", "nchw", 1},          {1, 67, 67, "nchw", "nchw", "nchw", 1},
    {3, 67, 67, "nchw", "nchw", "nchw", 0},        {3, 99, 131, "nchw", "nchw", "nchw", 1},
    {2, 31, 227, "nchw", "nchw", "nchw", 1},       {1, 300, 257, "nchw", "nchw", "nchw", 1},
    {1, 40, 1100, "nchw", "nchw", "nchw", 1},      {2, 40, 256, "nchw", "nchw", "nchw", 0},
    {8, 224, 224, "nchw", "nchw", "nchw", 1},      {3, 99, 131, "nhwc", "nhwc", "nchw", 1},
    {2, 227, 227, "nhwc", "nhwc", "nchw", 1},      {2, 67, 99, "wstride2", "nchw", "nchw", 1},
    {2, 35, 35, "nchw", "nhwc", "nhwc", 64},
    {2, 224, 224, "nchw", "nchw", "nchw", 1, 64, true}, {2, 35, 43, "nchw", "nhwc", "nchw", 1, 8, true},
    {3, 99, 131, "nchw", "nchw", "nchw", 0, 40, true},  {2, 40, 256, "nchw", "nchw", "nhwc", 1, 88},
    {3, 67, 67, "nhwc", "nhwc", "nchw", 1, 96, true},
    {2, 227, 227, "nchw", "nchw", "nchw", 1, 96, true, 0}, {2, 224, 224, "nchw", "nhwc", "nchw", 1, 64, false, 0},
    {3, 11, 11, "nchw", "nchw", "nchw", 1, 96, false, 0},  {2, 1, 1, "nchw", "nchw", "nchw", 1, 96, false, 5},
    {2, 37, 30, "nchw", "nchw", "nchw", 1, 96, false, 1},  {2, 67, 99, "nhwc", "nhwc", "nchw", 1, 40, true, 3},
    {3, 99, 131, "nchw", "nchw", "nchw", 0, 96, true, 5},  {1, 40, 1100, "nchw", "nchw", "nchw", 1, 96, false, 4},
    {2, 35, 43, "nchw", "nchw", "nchw", 1, 1},             {3, 67, 67, "nchw", "nhwc", "nchw", 1, 17, true},
    {2, 67, 99, "nhwc", "nhwc", "nchw", 1, 12},            {2, 227, 227, "nchw", "nchw", "nchw", 0, 95, true, 0},
    {3, 37, 64, "nchw", "nchw", "nchw", 1, 96, false, 3},  {2, 45, 32, "nchw", "nchw", "nchw", 1, 40, true, 1},
};
// Batch 0: every launcher must return without touching the output.
inline const Group kEmpty{0, 224, 224, "nchw", "nchw", "nchw", 1};
inline const Mode kModes[] = {Mode::kFloat32, Mode::kTf32, Mode::kFloat16, Mode::kBFloat16};

struct DeviceClass {
  std::string name;  // "native" or "as-8.0", as ALEXCONV_EMULATE_DEVICE would plan
  DeviceInfo info;
};

// The classes to plan as: the device itself, then A100 (8.0) and the 99 KB parts (8.6) where
// this device has at least their shared memory (dispatch.cpp device_info refuses more).
inline std::vector<DeviceClass> device_classes(const DeviceInfo& native) {
  std::vector<DeviceClass> classes{{"native", native}};
  const struct { int major, minor; size_t smem; } kEmulated[] = {{8, 0, kSmemA100}, {8, 6, kSmem99KB}};
  for (const auto& e : kEmulated) {
    const std::string name = "as-" + std::to_string(e.major) + "." + std::to_string(e.minor);
    if (e.smem > native.max_smem_per_block_optin) {
      std::printf("note: %s not planned: it takes %zu bytes of shared memory, this GPU has %zu\n", name.c_str(),
                  e.smem, native.max_smem_per_block_optin);
      continue;
    }
    DeviceInfo d = native;
    d.major = e.major, d.minor = e.minor, d.max_smem_per_block_optin = e.smem, d.emulated = true;
    classes.push_back({name, d});
  }
  return classes;
}

enum class Family { kDirect, kIgemm, kS2d, kS2dMmaSync };
struct Launch {
  Family family;
  Fit fit;     // the register gather's fit asked for; the portable s2d's as it planned
  bool wgmma;  // the register gather's engine
  int cls;     // index into the device classes
  std::string kernel, fit_name, staging;
};

// The family's plan for the launch on its class, as the library's dispatcher would get it
// (launch_plan.h); the run re-plans with the real problem (its pointers), as the op does.
inline std::optional<LaunchPlan> plan_of(const Launch& L, const Problem& p, const std::vector<DeviceClass>& classes) {
  const DeviceInfo& d = classes[size_t(L.cls)].info;
  switch (L.family) {
    case Family::kDirect: return plan_direct(p);
    case Family::kIgemm: return plan_igemm(p, d, L.fit, L.wgmma);
    case Family::kS2d: return plan_s2d(p, d);
    case Family::kS2dMmaSync: return plan_s2d_mma_sync(p, d);
  }
  return std::nullopt;
}

// Every launch the library could make for this problem: direct (device-independent; no TF32
// mode of its own), the register gather in every fit it plans per class (wgmma and mma.sync
// both where Whole has wgmma), s2d where it plans, and the portable s2d in the fit it plans.
inline std::vector<Launch> plan_launches(const Problem& p, Mode mode, const std::vector<DeviceClass>& classes) {
  std::vector<Launch> out;
  const auto add = [&](Family family, Fit fit, bool wgmma, int c, const std::optional<LaunchPlan>& plan) {
    if (!plan) return;
    out.push_back({family, fit, wgmma, c, kernel_name(plan->kernel), family == Family::kS2d ? "-" : fit_name(plan->fit),
                   staging_name(plan->staging)});
  };
  if (mode != Mode::kTf32) out.push_back({Family::kDirect, Fit::kWhole, false, 0, kernel_name(Kernel::kDirect), "-", "-"});
  for (int c = 0; c < int(classes.size()); ++c) {
    const DeviceInfo& d = classes[size_t(c)].info;
    for (Fit fit : {Fit::kWhole, Fit::kHalves, Fit::kQuarters}) {
      for (bool wgmma : {true, false}) add(Family::kIgemm, fit, wgmma, c, plan_igemm(p, d, fit, wgmma));
    }
    add(Family::kS2d, Fit::kWhole, false, c, plan_s2d(p, d));
    const std::optional<LaunchPlan> portable = plan_s2d_mma_sync(p, d);
    add(Family::kS2dMmaSync, portable ? portable->fit : Fit::kWhole, false, c, portable);
  }
  return out;
}

struct Layouts {
  Layout in, weight, out;
};
inline Layouts layouts_of(const Group& g) {
  return {make_layout(g.in_kind, g.n, 3, g.h, g.w), make_layout(g.w_kind, g.channels, 3, 11, 11),
          make_layout(g.out_kind, g.n, g.channels, out_size(g.h, g.pad), out_size(g.w, g.pad))};
}

// The kernels' view of a call, as conv1_cuda.cpp make_problem builds it.
inline Problem make_problem(const Group& g, Mode mode, const Layouts& l, const char* in, const char* w, const char* b,
                     char* out) {
  Problem p;
  const int eb = mode_bytes(mode);
  p.input = in + l.in.offset * eb;
  p.weight = w + l.weight.offset * eb;
  p.bias = g.bias_scale != 0 ? b : nullptr;
  p.bias_stride = g.bias_scale != 0 ? 1 : 0;
  p.output = out + l.out.offset * eb;
  p.dtype = mode == Mode::kFloat16 ? DType::kFloat16 : mode == Mode::kBFloat16 ? DType::kBFloat16 : DType::kFloat32;
  p.allow_tf32 = mode == Mode::kTf32;
  p.batch = g.n, p.in_h = g.h, p.in_w = g.w, p.out_h = l.out.size[2], p.out_w = l.out.size[3];
  for (int i = 0; i < 4; ++i) {
    p.in_stride[i] = l.in.stride[i], p.weight_stride[i] = l.weight.stride[i], p.out_stride[i] = l.out.stride[i];
  }
  p.out_channels = g.channels, p.relu = g.relu, p.pad = g.pad;
  p.out_pixel_major = pixel_major_output(p);
  return p;
}

inline std::string describe(const Group& g) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lldx3x%lldx%lld->%lld %s->%s w:%s %s%s%s", (long long)g.n, (long long)g.h,
                (long long)g.w, (long long)g.channels, g.in_kind, g.out_kind, g.w_kind,
                g.bias_scale == 0 ? "nobias" : g.bias_scale == 1 ? "bias" : "bias*64", g.relu ? " relu" : "",
                g.pad != 2 ? (" pad" + std::to_string(g.pad)).c_str() : "");
  return buf;
}
inline std::string case_label(const Launch& L, const std::vector<DeviceClass>& classes, Mode mode, const std::string& shape) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-8s %-7s %-13s %s", L.kernel.c_str(), L.fit_name.c_str(),
                classes[size_t(L.cls)].name.c_str(), mode_name(mode), shape.c_str());
  return buf;
}

// Output buffers carry this many poisoned bytes on each side: a write past the output shows.
inline constexpr size_t kGuard = 4096;
// Planning needs pointers only for their alignment: cudaMalloc's are 256-byte aligned.
inline char* const kFakeBase = reinterpret_cast<char*>(uintptr_t(1) << 20);
inline Problem planning_problem(const Group& g, Mode mode) {
  return make_problem(g, mode, layouts_of(g), kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
}

inline bool guards_intact(const std::vector<unsigned char>& host, size_t bytes) {
  for (size_t i = 0; i < kGuard; ++i) {
    if (host[i] != 0xFF || host[bytes - 1 - i] != 0xFF) return false;
  }
  return true;
}

inline Mode storage_of(Mode m) { return m == Mode::kTf32 ? Mode::kFloat32 : m; }
inline const Mode kStorages[] = {Mode::kFloat32, Mode::kFloat16, Mode::kBFloat16};

// Fresh inputs for a group in a storage dtype: uniform, fixed seed, no element zero after
// rounding. Weight and bias as nn.Conv2d initialises them: U(-1/sqrt(363), 1/sqrt(363)).
struct HostData {
  std::vector<double> x, w, b;
};
inline HostData make_data(const Group& g, Mode storage, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto draw = [&](std::vector<double>& v, size_t count, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    v.resize(count);
    for (double& e : v) {
      do e = round_to_mode(storage, u(rng)); while (e == 0);
    }
  };
  const float bound = float(1.0 / std::sqrt(363.0));
  HostData d;
  draw(d.x, size_t(g.n * 3 * g.h * g.w), 1.0f);
  draw(d.w, size_t(g.channels * 363), bound);
  if (g.bias_scale != 0) draw(d.b, size_t(g.channels), float(bound * g.bias_scale));
  return d;
}

}  // namespace harness
