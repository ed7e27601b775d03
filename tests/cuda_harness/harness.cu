// Standalone check of the CUDA kernels (op/cuda) without torch: it launches them through
// kernel_api.h exactly as dispatch.cpp does, on every path that the device (and the GPU
// classes ALEXCONV_EMULATE_DEVICE plans as) can take, and compares every output element with
// a float64 CPU reference under the library's numerical contract (reference.h). Built by
// scripts/build_cuda_harness.sh, e.g. with nvcc 11.8 and the static runtime, so that a binary
// of the 11.8-compiled kernels runs on any driver that takes CUDA 11.8.
//
//   alexconv_cuda_harness               every case on device 0; "N passed, M failed" last
//   alexconv_cuda_harness --filter S    only the cases whose line contains S
//   alexconv_cuda_harness --list 9.0:232448:132   the cases a GPU of that class gets (no GPU)
//   alexconv_cuda_harness --self-test   CPU only: the reference and the judge, checked
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/kernel_api.h"
#include "reference.h"

#ifndef ALEXCONV_HARNESS_ARCHS
#define ALEXCONV_HARNESS_ARCHS "?"
#endif

using namespace alexconv::cuda;
using harness::Layout;
using harness::Mode;

namespace {

// ---- What runs: shapes x layouts, modes, and the launches each device class takes.

// One input configuration. Layouts: "nchw", "nhwc" (channels_last), "wstride2" (input only).
// bias_scale 0: no bias; 64: a bias far larger than the sum (accumulators start at the bias).
struct Group {
  int64_t n, h, w;
  const char *in_kind, *out_kind, *w_kind;
  double bias_scale;
};
// Small ragged shapes (one-past tile and stride boundaries, multi-strip plans, 16-bit boxes
// past 256 columns; tests/test_correctness.py's reasons), one batch-8 224x224, channels_last
// input and output, a non-unit column stride, a channels_last weight. The CPU reference costs
// 363 MACs per output: about 4.6e9 MACs in all, well under 60 s on 16 cores.
const Group kGroups[] = {
    {1, 7, 7, "nchw", "nchw", "nchw", 1},          {1, 67, 67, "nchw", "nchw", "nchw", 1},
    {3, 67, 67, "nchw", "nchw", "nchw", 0},        {3, 99, 131, "nchw", "nchw", "nchw", 1},
    {2, 31, 227, "nchw", "nchw", "nchw", 1},       {1, 300, 257, "nchw", "nchw", "nchw", 1},
    {1, 40, 1100, "nchw", "nchw", "nchw", 1},      {2, 40, 256, "nchw", "nchw", "nchw", 0},
    {8, 224, 224, "nchw", "nchw", "nchw", 1},      {3, 99, 131, "nhwc", "nhwc", "nchw", 1},
    {2, 227, 227, "nhwc", "nhwc", "nchw", 1},      {2, 67, 99, "wstride2", "nchw", "nchw", 1},
    {2, 35, 35, "nchw", "nhwc", "nhwc", 64},
};
const Mode kModes[] = {Mode::kFloat32, Mode::kTf32, Mode::kFloat16, Mode::kBFloat16};

struct DeviceClass {
  std::string name;  // "native" or "as-8.0", as ALEXCONV_EMULATE_DEVICE would plan
  DeviceInfo info;
};

// The classes to plan as: the device itself, then A100 (8.0) and the 99 KB parts (8.6) where
// this device has at least their shared memory (dispatch.cpp device_info refuses more).
std::vector<DeviceClass> device_classes(const DeviceInfo& native) {
  std::vector<DeviceClass> classes{{"native", native}};
  const struct { int major, minor; size_t smem; } kEmulated[] = {{8, 0, 166912}, {8, 6, 101376}};
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

enum class Family { kDirect, kIgemm, kS2d };
struct Launch {
  Family family;
  IgemmFit fit;
  bool wgmma;  // DeviceInfo::allow_wgmma, as dispatch.cpp launch() sets it
  int cls;     // index into the device classes
  std::string kernel, fit_name;
};

const char* fit_name(IgemmFit f) {
  return f == IgemmFit::kResident ? "Resident" : f == IgemmFit::kHalfN ? "HalfN" : f == IgemmFit::kQuarterN ? "QuarterN" : "-";
}

// Every launch the library could make for this problem: direct (device-independent; no TF32
// mode of its own), the register gather in every fit igemm_fit_supported accepts per class
// (wgmma and mma.sync both where the resident fit has wgmma), and s2d where s2d_facts allows.
std::vector<Launch> plan_launches(const Problem& p, Mode mode, const std::vector<DeviceClass>& classes) {
  std::vector<Launch> out;
  if (mode != Mode::kTf32) out.push_back({Family::kDirect, IgemmFit::kNone, false, 0, "direct", "-"});
  for (int c = 0; c < int(classes.size()); ++c) {
    const DeviceInfo& d = classes[size_t(c)].info;
    for (IgemmFit fit : {IgemmFit::kResident, IgemmFit::kHalfN, IgemmFit::kQuarterN}) {
      if (!igemm_fit_supported(p, d, fit)) continue;
      if (fit == IgemmFit::kResident && wgmma_available(d)) out.push_back({Family::kIgemm, fit, true, c, "wgmma", fit_name(fit)});
      const char* name = fit == IgemmFit::kHalfN ? "mma_sync_n48" : fit == IgemmFit::kQuarterN ? "mma_sync_n24" : "mma_sync";
      out.push_back({Family::kIgemm, fit, false, c, name, fit_name(fit)});
    }
    if (s2d_facts(p, d).supported) out.push_back({Family::kS2d, IgemmFit::kNone, false, c, "s2d", "-"});
  }
  return out;
}

struct Layouts {
  Layout in, weight, out;
};
Layouts layouts_of(const Group& g) {
  using harness::make_layout;
  using harness::out_size;
  return {make_layout(g.in_kind, g.n, 3, g.h, g.w), make_layout(g.w_kind, 96, 3, 11, 11),
          make_layout(g.out_kind, g.n, 96, out_size(g.h), out_size(g.w))};
}

// The kernels' view of a call, as conv1_cuda.cpp make_problem builds it.
Problem make_problem(const Group& g, Mode mode, const Layouts& l, const char* in, const char* w, const char* b,
                     char* out) {
  Problem p;
  const int eb = harness::mode_bytes(mode);
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
  p.out_pixel_major = pixel_major_output(p);
  return p;
}

std::string describe(const Group& g) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lldx3x%lldx%lld %s->%s w:%s %s", (long long)g.n, (long long)g.h, (long long)g.w,
                g.in_kind, g.out_kind, g.w_kind, g.bias_scale == 0 ? "nobias" : g.bias_scale == 1 ? "bias" : "bias*64");
  return buf;
}
std::string case_label(const Launch& L, const std::vector<DeviceClass>& classes, Mode mode, const std::string& shape) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-8s %-7s %-13s %s", L.kernel.c_str(), L.fit_name.c_str(),
                classes[size_t(L.cls)].name.c_str(), harness::mode_name(mode), shape.c_str());
  return buf;
}

// Output buffers carry this many poisoned bytes on each side: a write past the output shows.
constexpr size_t kGuard = 4096;
// Planning needs pointers only for their alignment: cudaMalloc's are 256-byte aligned.
char* const kFakeBase = reinterpret_cast<char*>(uintptr_t(1) << 20);

// ---- Running on the GPU.

#define CHECK_CUDA(call)                                                                               \
  do {                                                                                                 \
    const cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                           \
      std::printf("fatal: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__);       \
      std::exit(2);                                                                                    \
    }                                                                                                  \
  } while (0)

cudaError_t launch(const Launch& L, const Problem& p, const std::vector<DeviceClass>& classes, cudaStream_t s) {
  DeviceInfo d = classes[size_t(L.cls)].info;
  switch (L.family) {
    case Family::kDirect: return launch_conv1_direct(p, s);
    case Family::kS2d: return launch_conv1_s2d(p, d, s);
    case Family::kIgemm: d.allow_wgmma = L.wgmma; return launch_conv1_igemm(p, d, L.fit, s);
  }
  return cudaErrorInvalidValue;
}

// Waits for the stream, polling: a kernel that never finishes (a ring deadlock) ends the
// run with a message instead of hanging it.
cudaError_t wait_for(cudaStream_t s, const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e != cudaErrorNotReady) return e;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
      std::printf("FAIL %s  hung: no completion after 60 s; stopping\n", label.c_str());
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Launch + completion. Returns "" or what went wrong; sets `lost` when the context is gone
// (a sticky error: nothing after it can run).
std::string run_once(const Launch& L, const Problem& p, const std::vector<DeviceClass>& classes, cudaStream_t s,
                     char* alloc, size_t bytes, std::vector<unsigned char>& host, const std::string& label,
                     bool& lost) {
  std::string why;
  CHECK_CUDA(cudaMemsetAsync(alloc, 0xFF, bytes, s));  // NaN in every dtype: unwritten shows
  cudaError_t e = launch(L, p, classes, s);
  if (e != cudaSuccess) why = std::string("launch returned ") + cudaGetErrorString(e);
  const cudaError_t last = cudaGetLastError();
  if (last != cudaSuccess) why += std::string(why.empty() ? "" : "; ") + "launch error " + cudaGetErrorString(last);
  e = wait_for(s, label);
  if (e != cudaSuccess) why += std::string(why.empty() ? "" : "; ") + "kernel error " + cudaGetErrorString(e);
  if (!why.empty()) {
    (void)cudaGetLastError();
    // A sticky error fails every later call: probe with a memset.
    lost = cudaMemsetAsync(alloc, 0xFF, bytes, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess;
    return why;
  }
  host.resize(bytes);
  CHECK_CUDA(cudaMemcpy(host.data(), alloc, bytes, cudaMemcpyDeviceToHost));
  return "";
}

bool guards_intact(const std::vector<unsigned char>& host, size_t bytes) {
  for (size_t i = 0; i < kGuard; ++i) {
    if (host[i] != 0xFF || host[bytes - 1 - i] != 0xFF) return false;
  }
  return true;
}

struct Tally {
  int passed = 0, failed = 0;
};

// One case: poisoned output, launch, check errors, every element against the reference,
// guards, then a second run that must give the same bits.
void run_case(const Launch& L, const Problem& p, Mode mode, const Layout& out_layout,
              const std::vector<DeviceClass>& classes, cudaStream_t s, char* alloc, size_t bytes,
              const harness::Reference& ref, const std::string& label, Tally& tally, bool& lost) {
  std::vector<unsigned char> first, second;
  std::string why = run_once(L, p, classes, s, alloc, bytes, first, label, lost);
  harness::Verdict v;
  bool same = false;
  if (why.empty()) {
    const std::vector<double> out = harness::gather(mode, out_layout, first.data() + kGuard);
    v = harness::judge(mode, out, ref);
    why = v.why;
    if (!guards_intact(first, bytes)) why += "writes outside the output; ";
    const std::string again = run_once(L, p, classes, s, alloc, bytes, second, label, lost);
    if (!again.empty()) {
      why += "second run: " + again;
    } else {
      same = first == second;
      if (!same) {
        int64_t differ = 0;
        const int eb = harness::mode_bytes(mode);
        for (size_t i = 0; i + eb <= bytes; i += size_t(eb)) differ += std::memcmp(&first[i], &second[i], size_t(eb)) != 0;
        why += "not deterministic: " + std::to_string(differ) + " elements differ between two runs; ";
      }
    }
  }
  const bool pass = why.empty();
  (pass ? tally.passed : tally.failed)++;
  std::printf("%s %s  max_err %.3g  rel_err %.3g%s%s\n", pass ? "PASS" : "FAIL", label.c_str(), v.max_err, v.rel_err,
              pass ? "  deterministic" : "  -- ", why.c_str());
  std::fflush(stdout);
}

// Fresh inputs for a group in a storage dtype: uniform, fixed seed, no element zero after
// rounding. Weight and bias as nn.Conv2d initialises them: U(-1/sqrt(363), 1/sqrt(363)).
struct HostData {
  std::vector<double> x, w, b;
};
HostData make_data(const Group& g, Mode storage, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto draw = [&](std::vector<double>& v, size_t count, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    v.resize(count);
    for (double& e : v) {
      do e = harness::round_to_mode(storage, u(rng)); while (e == 0);
    }
  };
  const float bound = float(1.0 / std::sqrt(363.0));
  HostData d;
  draw(d.x, size_t(g.n * 3 * g.h * g.w), 1.0f);
  draw(d.w, size_t(96 * 363), bound);
  if (g.bias_scale != 0) draw(d.b, 96, float(bound * g.bias_scale));
  return d;
}

char* upload(Mode m, const Layout& l, const std::vector<double>& dense, double fill) {
  const int eb = harness::mode_bytes(m);
  std::vector<unsigned char> buf(size_t(std::max<int64_t>(l.span, 1) * eb));
  // Elements outside the view (wstride2's gaps) hold a large finite value: reading one
  // into a sum shows as a wrong result.
  for (size_t i = 0; i < buf.size(); i += size_t(eb)) harness::encode(m, fill, &buf[i]);
  harness::scatter(m, l, dense, buf);
  char* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, buf.size()));
  CHECK_CUDA(cudaMemcpy(d, buf.data(), buf.size(), cudaMemcpyHostToDevice));
  return d;
}

Mode storage_of(Mode m) { return m == Mode::kTf32 ? Mode::kFloat32 : m; }

int run_all(const std::string& filter, uint64_t seed) {
  int dev = 0;
  CHECK_CUDA(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  int driver = 0, runtime = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  // DeviceInfo as dispatch.cpp device_info fills it.
  DeviceInfo native;
  native.sm_count = prop.multiProcessorCount;
  native.major = prop.major, native.minor = prop.minor;
  native.max_smem_per_block_optin = prop.sharedMemPerBlockOptin;
  std::printf("device: %s, sm_%d%d, %d SMs, %zu bytes shared memory per block (opt-in); driver %d, runtime %d\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, size_t(prop.sharedMemPerBlockOptin), driver,
              runtime);
  std::printf("build: nvcc %d.%d, targets %s, sm_90a kernels %s; seed %llu\n", __CUDACC_VER_MAJOR__,
              __CUDACC_VER_MINOR__, ALEXCONV_HARNESS_ARCHS, wgmma_available({0, 9, 0}) ? "yes" : "no",
              (unsigned long long)seed);
  const std::vector<DeviceClass> classes = device_classes(native);
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  Tally tally;
  bool lost = false;
  int planned = 0;
  const auto stop_if_lost = [&] {
    if (!lost) return;
    std::printf("the CUDA context is lost (sticky error): the remaining cases cannot run and count as failed\n");
    tally.failed += planned - tally.passed - tally.failed;
    std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
    std::exit(1);
  };
  // The plan first, so that a lost context can count what did not run.
  const Group empty{0, 224, 224, "nchw", "nchw", "nchw", 1};
  for (const Group& g : {empty}) {
    for (Mode m : kModes) {
      const Problem p = make_problem(g, m, layouts_of(g), kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
      for (const Launch& L : plan_launches(p, m, classes)) planned += case_label(L, classes, m, describe(g)).find(filter) != std::string::npos;
    }
  }
  for (const Group& g : kGroups) {
    const Layouts l = layouts_of(g);
    for (Mode m : kModes) {
      const Problem p = make_problem(g, m, l, kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
      for (const Launch& L : plan_launches(p, m, classes)) planned += case_label(L, classes, m, describe(g)).find(filter) != std::string::npos;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  double reference_s = 0;
  for (size_t gi = 0; gi < sizeof kGroups / sizeof kGroups[0]; ++gi) {
    const Group& g = kGroups[gi];
    const Layouts l = layouts_of(g);
    const std::string shape = describe(g);
    for (Mode storage : {Mode::kFloat32, Mode::kFloat16, Mode::kBFloat16}) {
      // This storage's cases (float32 also runs allow_tf32 on the same data).
      std::vector<std::pair<Mode, Launch>> todo;
      for (Mode m : kModes) {
        if (storage_of(m) != storage) continue;
        const Problem p = make_problem(g, m, l, kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
        for (const Launch& L : plan_launches(p, m, classes)) {
          if (case_label(L, classes, m, shape).find(filter) != std::string::npos) todo.push_back({m, L});
        }
      }
      if (todo.empty()) continue;
      const HostData data = make_data(g, storage, seed + 1000 * gi + uint64_t(storage));
      const auto r0 = std::chrono::steady_clock::now();
      const harness::Reference ref =
          harness::reference(data.x, data.w, g.bias_scale != 0 ? &data.b : nullptr, g.n, g.h, g.w);
      reference_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      char* in = upload(storage, l.in, data.x, 1000.0);
      char* w = upload(storage, l.weight, data.w, 1000.0);
      char* b = upload(storage, harness::make_layout("nchw", 1, 96, 1, 1),
                       g.bias_scale != 0 ? data.b : std::vector<double>(96, 0.0), 1000.0);
      const size_t bytes = size_t(l.out.span * harness::mode_bytes(storage)) + 2 * kGuard;
      char* out = nullptr;
      CHECK_CUDA(cudaMalloc(&out, bytes));
      for (const auto& [m, L] : todo) {
        const Problem p = make_problem(g, m, l, in, w, b, out + kGuard);
        const Problem planned_p = make_problem(g, m, l, kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
        const std::string label = case_label(L, classes, m, shape);
        if (p.out_pixel_major != planned_p.out_pixel_major) std::printf("note: %s: alignment differs from the plan\n", label.c_str());
        run_case(L, p, m, l.out, classes, s, out, bytes, ref, label, tally, lost);
        stop_if_lost();
      }
      for (char* ptr : {in, w, b, out}) CHECK_CUDA(cudaFree(ptr));
    }
  }
  // Batch 0: every launcher returns without touching the output (the library never calls
  // them so, conv1_cuda.cpp returns the empty tensor first; they must still be harmless).
  const Layouts el = layouts_of(empty);
  char *sentinel = nullptr, *operands = nullptr;
  CHECK_CUDA(cudaMalloc(&sentinel, kGuard));
  CHECK_CUDA(cudaMalloc(&operands, 96 * 363 * 4 + 96 * 4));
  CHECK_CUDA(cudaMemset(operands, 0, 96 * 363 * 4 + 96 * 4));
  for (Mode m : kModes) {
    const Problem p = make_problem(empty, m, el, operands, operands, operands + 96 * 363 * 4, sentinel);
    for (const Launch& L : plan_launches(p, m, classes)) {
      const std::string label = case_label(L, classes, m, describe(empty));
      if (label.find(filter) == std::string::npos) continue;
      std::vector<unsigned char> host;
      std::string why = run_once(L, p, classes, s, sentinel, kGuard, host, label, lost);
      if (why.empty() && host != std::vector<unsigned char>(kGuard, 0xFF)) why = "batch 0 wrote to the output";
      (why.empty() ? tally.passed : tally.failed)++;
      std::printf("%s %s  nothing written%s%s\n", why.empty() ? "PASS" : "FAIL", label.c_str(), why.empty() ? "" : "  -- ",
                  why.c_str());
      stop_if_lost();
    }
  }
  CHECK_CUDA(cudaFree(sentinel));
  CHECK_CUDA(cudaFree(operands));
  CHECK_CUDA(cudaStreamDestroy(s));
  std::printf("time: %.1f s (CPU reference %.1f s, %u threads)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), reference_s,
              std::thread::hardware_concurrency());
  std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 && tally.passed > 0 ? 0 : 1;
}

// ---- --list: the plan for a GPU class given as "major.minor:smem_bytes:sms" (no GPU needed).
int list_cases(const std::string& spec) {
  DeviceInfo native;
  int major = 0, minor = 0, sms = 0;
  unsigned long long smem = 0;
  if (std::sscanf(spec.c_str(), "%d.%d:%llu:%d", &major, &minor, &smem, &sms) != 4) {
    std::printf("--list wants major.minor:smem_bytes:sms, e.g. 9.0:232448:132\n");
    return 2;
  }
  native.major = major, native.minor = minor, native.max_smem_per_block_optin = size_t(smem), native.sm_count = sms;
  const std::vector<DeviceClass> classes = device_classes(native);
  int count = 0;
  for (const Group& g : kGroups) {
    const Layouts l = layouts_of(g);
    for (Mode m : kModes) {
      const Problem p = make_problem(g, m, l, kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
      for (const Launch& L : plan_launches(p, m, classes)) {
        std::printf("%s\n", case_label(L, classes, m, describe(g)).c_str());
        ++count;
      }
    }
  }
  const Group empty{0, 224, 224, "nchw", "nchw", "nchw", 1};
  for (Mode m : kModes) {
    const Problem p = make_problem(empty, m, layouts_of(empty), kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
    for (const Launch& L : plan_launches(p, m, classes)) {
      std::printf("%s\n", case_label(L, classes, m, describe(empty)).c_str());
      ++count;
    }
  }
  std::printf("%d cases planned\n", count);
  return 0;
}

// ---- --self-test: the CPU side checked on its own, and the judge shown to fail wrong outputs.
int self_test_failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  self_test_failures += !ok;
}

// The reference by the definition, loop by loop, with none of reference()'s structure.
std::vector<double> naive(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                          int64_t n, int64_t h, int64_t wd) {
  const int64_t oh = (h + 4 - 11) / 4 + 1, ow = (wd + 4 - 11) / 4 + 1;
  std::vector<double> y(size_t(n * 96 * oh * ow));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < 96; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t c = 0; c < ow; ++c) {
          double s = 0;
          for (int64_t ci = 0; ci < 3; ++ci)
            for (int64_t ky = 0; ky < 11; ++ky)
              for (int64_t kx = 0; kx < 11; ++kx) {
                const int64_t yy = 4 * r + ky - 2, xx = 4 * c + kx - 2;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                s += x[size_t(((i * 3 + ci) * h + yy) * wd + xx)] * w[size_t(((o * 3 + ci) * 11 + ky) * 11 + kx)];
              }
          y[size_t(((i * 96 + o) * oh + r) * ow + c)] = s + (b ? (*b)[size_t(o)] : 0.0);
        }
  return y;
}

int self_test() {
  // 1. The 16-bit conversions against CUDA's host conversions, edge values and random bits.
  {
    std::mt19937 rng(7);
    int64_t bad_h = 0, bad_b = 0, bad_dh = 0, bad_db = 0;
    std::vector<uint32_t> bits = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x477fe000u, 0x477ff000u, 0x477fefffu,
                                  0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u, 0x33000001u, 0x7f7fffffu, 0x00000001u};
    for (int i = 0; i < 2000000; ++i) bits.push_back(rng());
    for (int i = 0; i < 500000; ++i) bits.push_back((rng() & 0x87ffffffu) | 0x30000000u);  // near fp16's range
    for (uint32_t u : bits) {
      const float f = harness::bits_float(u);
      if (f != f) continue;
      // CUDA's bit casts are device-only: memcpy between the types and their bits.
      const __half hv = __float2half_rn(f);
      const __nv_bfloat16 bv = __float2bfloat16_rn(f);
      uint16_t h, b;
      std::memcpy(&h, &hv, 2);
      std::memcpy(&b, &bv, 2);
      bad_h += harness::float_to_half(f) != h;
      bad_b += harness::float_to_bf16(f) != b;
      bad_dh += harness::half_to_double(h) != double(__half2float(hv));
      bad_db += harness::bf16_to_double(b) != double(__bfloat162float(bv));
    }
    expect(bad_h == 0 && bad_b == 0 && bad_dh == 0 && bad_db == 0,
           "fp16/bf16 conversions match cuda_fp16/cuda_bf16 on " + std::to_string(bits.size()) + " floats (mismatches " +
               std::to_string(bad_h + bad_b + bad_dh + bad_db) + ")");
    expect(std::isnan(harness::half_to_double(harness::float_to_half(std::nanf("")))) &&
               std::isnan(harness::bf16_to_double(harness::float_to_bf16(std::nanf("")))),
           "NaN stays NaN in 16 bits");
  }
  // 2. reference() against the naive loops, with and without bias, ragged small shapes.
  for (const Group& g : {Group{2, 15, 19, "nchw", "nchw", "nchw", 1}, Group{1, 7, 7, "nchw", "nchw", "nchw", 0},
                         Group{1, 30, 11, "nchw", "nchw", "nchw", 64}}) {
    const HostData d = make_data(g, Mode::kFloat32, 11);
    const std::vector<double>* b = g.bias_scale != 0 ? &d.b : nullptr;
    const harness::Reference r = harness::reference(d.x, d.w, b, g.n, g.h, g.w);
    const std::vector<double> y = naive(d.x, d.w, b, g.n, g.h, g.w);
    double worst = 0;
    bool mag_ok = true;
    for (size_t i = 0; i < y.size(); ++i) {
      worst = std::max(worst, std::fabs(y[i] - r.value[i]));
      mag_ok &= r.magnitude[i] >= std::fabs(r.value[i]) * (1 - 1e-12);  // |sum| <= sum of |terms|
    }
    char diff[32];
    std::snprintf(diff, sizeof diff, "%.3g", worst);
    expect(r.value.size() == y.size() && worst < 1e-12 && mag_ok,
           "reference == naive loops on " + describe(g) + " (max diff " + diff + ")");
  }
  // 3. Layouts: every logical element at its own offset inside the buffer, and back again.
  for (const char* kind : {"nchw", "nhwc", "wstride2"}) {
    const Layout l = harness::make_layout(kind, 2, 3, 5, 7);
    std::vector<int> hits(size_t(l.span), 0);
    bool inside = true;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t h = 0; h < 5; ++h)
          for (int64_t w = 0; w < 7; ++w) {
            const int64_t o = l.at(n, c, h, w);
            inside &= o >= 0 && o < l.span;
            if (o >= 0 && o < l.span) ++hits[size_t(o)];
          }
    bool once = inside;
    for (int v : hits) once &= v <= 1;
    std::vector<double> dense(size_t(l.numel()));
    for (size_t i = 0; i < dense.size(); ++i) dense[i] = double(i) - 17.0;
    std::vector<unsigned char> buf(size_t(l.span * 4), 0);
    harness::scatter(Mode::kFloat32, l, dense, buf);
    expect(once && harness::gather(Mode::kFloat32, l, buf.data()) == dense,
           std::string("layout ") + kind + ": one offset per element, scatter/gather round trip");
  }
  // 4. The judge: exact outputs pass, a tolerable error passes, and every kind of wrong output
  // fails, in every mode and output layout, through the same decode path the device run uses.
  const Group g{2, 35, 43, "nchw", "nchw", "nchw", 1};
  for (Mode m : kModes) {
    const Mode storage = storage_of(m);
    const HostData d = make_data(g, storage, 5);
    const harness::Reference r = harness::reference(d.x, d.w, &d.b, g.n, g.h, g.w);
    int64_t big_bias = 0;  // the channel whose bias matters most
    for (int64_t c = 0; c < 96; ++c) if (std::fabs(d.b[size_t(c)]) > std::fabs(d.b[size_t(big_bias)])) big_bias = c;
    for (const char* kind : {"nchw", "nhwc"}) {
      const Layout l = harness::make_layout(kind, g.n, 96, harness::out_size(g.h), harness::out_size(g.w));
      const int eb = harness::mode_bytes(storage);
      const std::string tag = std::string(harness::mode_name(m)) + " " + kind + ": ";
      const auto verdict = [&](const std::vector<double>& values) {
        std::vector<unsigned char> buf(size_t(l.span * eb), 0xFF);
        harness::scatter(storage, l, values, buf);
        return harness::judge(m, harness::gather(storage, l, buf.data()), r);
      };
      const size_t probe = r.value.size() / 2 + 3;
      const double bound = harness::element_bound(m, r.value[probe], r.magnitude[probe]);
      expect(verdict(r.value).pass, tag + "the reference rounded to the dtype passes");
      std::vector<double> v = r.value;
      // (16 bits: rounding the perturbed value could add up to u * |ref| on its own.)
      if (storage == Mode::kFloat32) {
        v[probe] += 0.25 * bound;
        expect(verdict(v).pass, tag + "an error of a quarter of the bound passes");
      }
      v = r.value;
      v[probe] += 4 * bound + 4 * std::fabs(r.value[probe]) * std::ldexp(1.0, eb == 2 ? -8 : -23);
      expect(!verdict(v).pass, tag + "one element past its bound fails");
      v = r.value;
      v[probe] = std::nan("");
      expect(!verdict(v).pass, tag + "one NaN element fails");
      // The last element (the judge's loop reaches the end) past its bound, and the largest
      // one negated (a sign error where |ref| stands well above every bound).
      v = r.value;
      const size_t last = v.size() - 1;
      v[last] += 4 * harness::element_bound(m, r.value[last], r.magnitude[last]) +
                 4 * std::fabs(r.value[last]) * std::ldexp(1.0, eb == 2 ? -8 : -23);
      expect(!verdict(v).pass, tag + "the last element past its bound fails");
      size_t largest = 0;
      for (size_t i = 0; i < v.size(); ++i) if (std::fabs(r.value[i]) > std::fabs(r.value[largest])) largest = i;
      v = r.value;
      v[largest] = -v[largest];
      expect(!verdict(v).pass, tag + "the largest element negated fails");
      v = r.value;
      const int64_t plane = harness::out_size(g.h) * harness::out_size(g.w);
      for (int64_t i = 0; i < plane; ++i) v[size_t((1 * 96 + big_bias) * plane + i)] -= d.b[size_t(big_bias)];
      expect(!verdict(v).pass, tag + "one channel of one image without its bias fails");
      // An unwritten element: the poison (0xFF bytes) left in place.
      {
        std::vector<unsigned char> buf(size_t(l.span * eb), 0xFF);
        harness::scatter(storage, l, r.value, buf);
        std::memset(&buf[size_t(l.at(1, 95, 3, 4) * eb)], 0xFF, size_t(eb));
        expect(!harness::judge(m, harness::gather(storage, l, buf.data()), r).pass, tag + "one unwritten element fails");
        // The right values in the other layout (a transposed store).
        const Layout other = harness::make_layout(std::string(kind) == "nchw" ? "nhwc" : "nchw", l.size[0], l.size[1],
                                                  l.size[2], l.size[3]);
        harness::scatter(storage, l, r.value, buf);
        expect(!harness::judge(m, harness::gather(storage, other, buf.data()), r).pass, tag + "the wrong layout fails");
      }
    }
  }
  // 5. Guards and the determinism comparison notice one byte.
  {
    std::vector<unsigned char> a(3 * kGuard, 0xFF);
    expect(guards_intact(a, a.size()), "untouched guards pass");
    a[kGuard - 1] = 0;
    expect(!guards_intact(a, a.size()), "a byte written before the output is caught");
    a[kGuard - 1] = 0xFF, a[2 * kGuard] = 0x7F;
    expect(!guards_intact(a, a.size()), "a byte written after the output is caught");
    std::vector<unsigned char> b = a;
    b[kGuard + 5] ^= 1;
    expect(!(a == b), "a one-bit difference between runs is caught");
  }
  // 6. The plan: which fits each class gets (docs/architecture.md's dispatch table).
  {
    DeviceInfo h100;
    h100.sm_count = 132, h100.major = 9, h100.minor = 0, h100.max_smem_per_block_optin = 232448;
    const std::vector<DeviceClass> classes = device_classes(h100);
    const Group g2{3, 99, 131, "nchw", "nchw", "nchw", 1};
    const auto kernels = [&](Mode m, int cls) {
      const Problem p = make_problem(g2, m, layouts_of(g2), kFakeBase, kFakeBase, kFakeBase, kFakeBase + kGuard);
      std::string names;
      for (const Launch& L : plan_launches(p, m, classes)) {
        if (L.cls == cls && L.family == Family::kIgemm) names += (names.empty() ? "" : " ") + L.kernel;
      }
      return names;
    };
    const std::string wg = wgmma_available(h100) ? "wgmma " : "";
    expect(classes.size() == 3, "an H100 plans as itself, 8.0 and 8.6");
    expect(kernels(Mode::kFloat32, 0) == wg + "mma_sync mma_sync_n48 mma_sync_n24", "H100 float32: " + kernels(Mode::kFloat32, 0));
    expect(kernels(Mode::kFloat16, 0) == wg + "mma_sync mma_sync_n48", "H100 float16: " + kernels(Mode::kFloat16, 0));
    expect(kernels(Mode::kTf32, 1) == "mma_sync_n48 mma_sync_n24", "as-8.0 tf32: " + kernels(Mode::kTf32, 1));
    expect(kernels(Mode::kBFloat16, 1) == "mma_sync mma_sync_n48", "as-8.0 bfloat16: " + kernels(Mode::kBFloat16, 1));
    expect(kernels(Mode::kFloat32, 2) == "mma_sync_n24", "as-8.6 float32: " + kernels(Mode::kFloat32, 2));
    expect(kernels(Mode::kFloat16, 2) == "mma_sync_n48", "as-8.6 float16: " + kernels(Mode::kFloat16, 2));
  }
  std::printf("self-test: %d failed\n", self_test_failures);
  return self_test_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter, list;
  uint64_t seed = 20240501;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--self-test") return self_test();
    if (a == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--list" && i + 1 < argc) {
      list = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::printf("usage: %s [--self-test] [--list major.minor:smem:sms] [--filter TEXT] [--seed N]\n", argv[0]);
      return 2;
    }
  }
  if (!list.empty()) return list_cases(list);
  return run_all(filter, seed);
}
