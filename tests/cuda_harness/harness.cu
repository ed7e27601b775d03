// Standalone check of the CUDA kernels (op/cuda) without torch: it plans and launches them
// through launch_plan.h exactly as dispatch.cpp does, on every path that the device (and the GPU
// classes ALEXCONV_EMULATE_DEVICE plans as) can take, and compares every output element with
// a float64 CPU reference under the library's numerical contract (reference.h). Built by
// scripts/build_cuda_harness.sh, e.g. with nvcc 11.8 and the static runtime, so that a binary
// of the 11.8-compiled kernels runs on any driver that takes CUDA 11.8.
//
//   alexconv_cuda_harness               every case on device 0; "N passed, M failed" last
//   alexconv_cuda_harness --filter S    only the cases whose line contains S (every term of
//                                       "S1+S2": both)
//   alexconv_cuda_harness --list 9.0:232448:132   the cases a GPU of that class gets (no GPU)
//   alexconv_cuda_harness --self-test   CPU only: the reference and the judge, checked
//   alexconv_cuda_harness --time [--time-channels C] [--time-relu] [--time-batch N]
//                                [--time-layout nchw|nhwc] [--filter S]   median kernel time per
//                                       path at 224x224 (default batch 256, NCHW input and output,
//                                       C output channels, default 96; relu fused or not)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plan.h"

#ifndef ALEXCONV_HARNESS_ARCHS
#define ALEXCONV_HARNESS_ARCHS "?"
#endif

using namespace alexconv::cuda;
using namespace harness;

int self_test();  // self_test.cu

namespace {

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
  const std::optional<LaunchPlan> plan = plan_of(L, p, classes);
  return plan ? alexconv::cuda::launch(*plan, s) : cudaErrorInvalidValue;
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


// Whether a case's label holds every '+'-separated term of `filter` ("s2d_mma_sync+as-8.6").
bool matches(const std::string& label, const std::string& filter) {
  for (size_t from = 0;;) {
    const size_t plus = filter.find('+', from);
    if (label.find(filter.substr(from, plus - from)) == std::string::npos) return false;
    if (plus == std::string::npos) return true;
    from = plus + 1;
  }
}

// The cases of group g whose label matches `filter`, in the modes stored as `storage` (float32 also
// runs allow_tf32 on the same data), as the library would launch them.
std::vector<std::pair<Mode, Launch>> cases_of(const Group& g, Mode storage, const std::vector<DeviceClass>& classes,
                                              const std::string& filter) {
  std::vector<std::pair<Mode, Launch>> todo;
  if (g.channels % 8 != 0 && !kAnyChannelCount) return todo;  // kernels_cover: ATen's in this build
  for (Mode m : kModes) {
    if (storage_of(m) != storage) continue;
    for (const Launch& L : plan_launches(planning_problem(g, m), m, classes)) {
      if (matches(case_label(L, classes, m, describe(g)), filter)) todo.push_back({m, L});
    }
  }
  return todo;
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


// Device 0, described (with the build) on two lines, and the classes to plan as on it.
std::vector<DeviceClass> open_device(uint64_t seed) {
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
  return device_classes(native);
}

int run_all(const std::string& filter, uint64_t seed) {
  const std::vector<DeviceClass> classes = open_device(seed);
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
  for (Mode storage : kStorages) {
    planned += int(cases_of(kEmpty, storage, classes, filter).size());
    for (const Group& g : kGroups) planned += int(cases_of(g, storage, classes, filter).size());
  }
  const auto t0 = std::chrono::steady_clock::now();
  double reference_s = 0;
  for (size_t gi = 0; gi < sizeof kGroups / sizeof kGroups[0]; ++gi) {
    const Group& g = kGroups[gi];
    const Layouts l = layouts_of(g);
    const std::string shape = describe(g);
    for (Mode storage : kStorages) {
      const std::vector<std::pair<Mode, Launch>> todo = cases_of(g, storage, classes, filter);
      if (todo.empty()) continue;
      const HostData data = make_data(g, storage, seed + 1000 * gi + uint64_t(storage));
      const auto r0 = std::chrono::steady_clock::now();
      const harness::Reference ref =
          harness::reference(data.x, data.w, g.bias_scale != 0 ? &data.b : nullptr, g.n, g.h, g.w, g.relu, g.pad);
      reference_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      char* in = upload(storage, l.in, data.x, 1000.0);
      char* w = upload(storage, l.weight, data.w, 1000.0);
      char* b = upload(storage, harness::make_layout("nchw", 1, g.channels, 1, 1),
                       g.bias_scale != 0 ? data.b : std::vector<double>(size_t(g.channels), 0.0), 1000.0);
      const size_t bytes = size_t(l.out.span * harness::mode_bytes(storage)) + 2 * kGuard;
      char* out = nullptr;
      CHECK_CUDA(cudaMalloc(&out, bytes));
      for (const auto& [m, L] : todo) {
        const Problem p = make_problem(g, m, l, in, w, b, out + kGuard);
        const std::string label = case_label(L, classes, m, shape);
        if (p.out_pixel_major != planning_problem(g, m).out_pixel_major) std::printf("note: %s: alignment differs from the plan\n", label.c_str());
        run_case(L, p, m, l.out, classes, s, out, bytes, ref, label, tally, lost);
        stop_if_lost();
      }
      for (char* ptr : {in, w, b, out}) CHECK_CUDA(cudaFree(ptr));
    }
  }
  // Batch 0: every launcher returns without touching the output (the library never calls
  // them so, conv1_cuda.cpp returns the empty tensor first; they must still be harmless).
  const Layouts el = layouts_of(kEmpty);
  char *sentinel = nullptr, *operands = nullptr;
  CHECK_CUDA(cudaMalloc(&sentinel, kGuard));
  CHECK_CUDA(cudaMalloc(&operands, 96 * 363 * 4 + 96 * 4));
  CHECK_CUDA(cudaMemset(operands, 0, 96 * 363 * 4 + 96 * 4));
  for (Mode m : kModes) {
    const Problem p = make_problem(kEmpty, m, el, operands, operands, operands + 96 * 363 * 4, sentinel);
    for (const Launch& L : plan_launches(p, m, classes)) {
      const std::string label = case_label(L, classes, m, describe(kEmpty));
      if (!matches(label, filter)) continue;
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

// ---- --time: every launch path's kernel time at the benchmark's shape (224x224, bias; batch,
// layout, channels and relu as asked), so that a kernel change can be timed from a binary built on
// the CPU machine without the torch extension (and two toolkits' builds side by side:
// scripts/compare_toolkits.py). No correctness check here: the default mode does that.
int time_paths(const std::string& filter, uint64_t seed, int64_t batch, const char* layout, int64_t channels,
               bool relu) {
  const std::vector<DeviceClass> classes = open_device(seed);
  const Group g{batch, 224, 224, layout, layout, "nchw", 1, channels, relu};
  const Layouts l = layouts_of(g);
  // Each timed launch follows a memset of several times the L2 (50 MB on an H100): the kernel
  // starts cold, as a network layer does after the one before. No waits between launches: the
  // host runs ahead of the GPU from the first warm-up on, so a launch's host-side set-up
  // overlaps earlier GPU work instead of opening a gap between its pair of events.
  constexpr int kWarmups = 3, kTimed = 20;
  constexpr size_t kFlushBytes = size_t(256) << 20;
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  char* flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, kFlushBytes));
  std::vector<cudaEvent_t> events(2 * kTimed);
  for (cudaEvent_t& e : events) CHECK_CUDA(cudaEventCreate(&e));
  std::printf("time: %s; per path %d warm-up launches, then %d timed (cudaEvent) each after a %zu MB L2 flush\n",
              describe(g).c_str(), kWarmups, kTimed, kFlushBytes >> 20);
  std::printf("| %-12s | %-8s | %-7s | %-13s | %9s | %7s |\n", "path", "fit", "class", "mode", "median ms", "min ms");
  std::printf("|--------------|----------|---------|---------------|-----------|---------|\n");
  int failed = 0;
  for (Mode storage : kStorages) {
    const std::vector<std::pair<Mode, Launch>> todo = cases_of(g, storage, classes, filter);
    if (todo.empty()) continue;
    // Random operands (make_data: no element zero), as the check mode draws them.
    const HostData data = make_data(g, storage, seed);
    char* in = upload(storage, l.in, data.x, 1000.0);
    char* w = upload(storage, l.weight, data.w, 1000.0);
    char* b = upload(storage, harness::make_layout("nchw", 1, channels, 1, 1), data.b, 1000.0);
    const size_t bytes = size_t(l.out.span * harness::mode_bytes(storage));
    char* out = nullptr;
    CHECK_CUDA(cudaMalloc(&out, bytes));
    CHECK_CUDA(cudaMemset(out, 0xFF, bytes));
    for (const auto& [m, L] : todo) {
      const std::string label = case_label(L, classes, m, describe(g));
      const Problem p = make_problem(g, m, l, in, w, b, out);
      cudaError_t e = cudaSuccess;
      for (int k = 0; k < kWarmups + kTimed && e == cudaSuccess; ++k) {
        const int t = k - kWarmups;
        if (t >= 0) CHECK_CUDA(cudaMemsetAsync(flush, 0, kFlushBytes, s));
        if (t >= 0) CHECK_CUDA(cudaEventRecord(events[size_t(2 * t)], s));
        e = launch(L, p, classes, s);
        if (t >= 0) CHECK_CUDA(cudaEventRecord(events[size_t(2 * t + 1)], s));
      }
      if (e == cudaSuccess) e = cudaGetLastError();
      if (e == cudaSuccess) e = wait_for(s, label);
      if (e != cudaSuccess) {
        ++failed;
        std::printf("FAIL %s  %s\n", label.c_str(), cudaGetErrorString(e));
        (void)cudaGetLastError();
        // A kernel's error is sticky: nothing after it could run.
        if (cudaStreamSynchronize(s) != cudaSuccess) return 1;
        continue;
      }
      std::vector<float> ms(kTimed);
      for (int t = 0; t < kTimed; ++t) CHECK_CUDA(cudaEventElapsedTime(&ms[size_t(t)], events[size_t(2 * t)], events[size_t(2 * t + 1)]));
      std::sort(ms.begin(), ms.end());
      std::printf("| %-12s | %-8s | %-7s | %-13s | %9.3f | %7.3f |\n", L.kernel.c_str(), L.fit_name.c_str(),
                  classes[size_t(L.cls)].name.c_str(), mode_name(m), 0.5 * (ms[kTimed / 2 - 1] + ms[kTimed / 2]), ms[0]);
      std::fflush(stdout);
    }
    for (char* ptr : {in, w, b, out}) CHECK_CUDA(cudaFree(ptr));
  }
  for (cudaEvent_t e : events) CHECK_CUDA(cudaEventDestroy(e));
  CHECK_CUDA(cudaFree(flush));
  CHECK_CUDA(cudaStreamDestroy(s));
  return failed == 0 ? 0 : 1;
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
  std::vector<Group> groups(std::begin(kGroups), std::end(kGroups));
  groups.push_back(kEmpty);
  for (const Group& g : groups) {
    for (Mode storage : kStorages) {
      for (const auto& [m, L] : cases_of(g, storage, classes, "")) {
        std::printf("%s\n", case_label(L, classes, m, describe(g)).c_str());
        ++count;
      }
    }
  }
  std::printf("%d cases planned\n", count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter, list;
  uint64_t seed = 20240501;
  bool timing = false;
  int64_t channels = 96, batch = 256;
  bool relu = false;
  std::string layout = "nchw";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--self-test") return self_test();
    if (a == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--list" && i + 1 < argc) {
      list = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--time") {
      timing = true;
    } else if (a == "--time-channels" && i + 1 < argc) {
      channels = std::strtoll(argv[++i], nullptr, 10);
    } else if (a == "--time-relu") {
      relu = true;
    } else if (a == "--time-batch" && i + 1 < argc) {
      batch = std::strtoll(argv[++i], nullptr, 10);
    } else if (a == "--time-layout" && i + 1 < argc) {
      layout = argv[++i];
    } else {
      std::printf("usage: %s [--self-test] [--list major.minor:smem:sms] [--filter TEXT] [--seed N]"
                  " [--time [--time-channels C] [--time-relu] [--time-batch N] [--time-layout nchw|nhwc]]\n",
                  argv[0]);
      return 2;
    }
  }
  if (!list.empty()) return list_cases(list);
  // The kernels' range (kernel_api.h Problem::out_channels; kAnyChannelCount: CUDA 11.8 builds
  // store whole n-tiles, so a count that is no multiple of 8 would be written past).
  if (channels < 1 || channels > 96 || (!kAnyChannelCount && channels % 8 != 0)) {
    std::printf(kAnyChannelCount ? "--time-channels wants 1 to 96\n"
                                 : "--time-channels wants a multiple of 8 up to 96 (a CUDA 11.8 build)\n");
    return 2;
  }
  if (batch < 1 || (layout != "nchw" && layout != "nhwc")) {
    std::printf("--time-batch wants a batch of at least 1, --time-layout nchw or nhwc\n");
    return 2;
  }
  if (timing) return time_paths(filter, seed, batch, layout.c_str(), channels, relu);
  return run_all(filter, seed);
}
