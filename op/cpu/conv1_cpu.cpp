// CPU backend: splits the output into bands of rows and columns, stages each
// band's input as zero-padded float, and runs the micro-kernel for this CPU's
// instruction set on it (conv1_cpu_kernel.cpp), which rounds 16-bit outputs itself.
// Float accumulation for every dtype; int64 indexing throughout. ALEXCONV_CPU_KERNEL
// forces a path, ATen's convolution included.
#include <ATen/Parallel.h>
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "../compat.h"
#include "../conv1_checks.h"
#include "../conv1_geometry.h"
#include "conv1_cpu_kernel.h"
#include "conv1_cpu_aten.h"
#include "conv1_cpu_pairs.h"

namespace alexconv {
namespace {

// A band is at most this many output rows by columns: its staged input (3 x 39 x 263
// floats) stays in L2, and wide images need no more memory than narrow ones.
constexpr int64_t kMaxBandRows = 8;
constexpr int64_t kMaxBandCols = 64;

// The CPU paths: our micro-kernel per instruction set, or ATen's convolution. The bfloat16 ones
// run float32 and float16 calls as avx512 does, bfloat16 calls as pairs of taps
// (Kernel::run_band_pairs): with AVX512-BF16's dot products, or those emulated by FMAs (a
// test path for CPUs without them: same results but for subnormals, slower).
enum class Path { kBaseline, kAvx2, kAvx512, kAvx512Bf16, kAvx512Bf16Emulated, kAten };

// The name conv1_kernel gives a call of `dtype` on `path`.
const char* path_name(Path path, at::ScalarType dtype) {
  const bool pairs = dtype == at::kBFloat16;
  switch (path) {
    case Path::kBaseline: return "cpu_baseline";
    case Path::kAvx2: return "cpu_avx2";
    case Path::kAvx512: return "cpu_avx512";
    case Path::kAvx512Bf16: return pairs ? "cpu_avx512_bf16" : "cpu_avx512";
    case Path::kAvx512Bf16Emulated: return pairs ? "cpu_avx512_bf16_emulated" : "cpu_avx512";
    case Path::kAten: return "aten";
  }
  return "?";
}

// What this CPU (and the OS: __builtin_cpu_supports checks that it saves the vector
// registers) offers the paths, and whether this build has their kernels.
struct CpuFeatures {
  bool avx2 = false;       // AVX2 + FMA + F16C: the avx2 kernel
  bool avx512 = false;     // AVX-512 F/BW/DQ/VL + AVX2 + FMA + F16C: the avx512 kernel (ATen's AVX512)
  bool avx512_bf16 = false;  // and AVX512-BF16: the avx512_bf16 kernel
  bool amx_bf16 = false;     // AMX-BF16 (Sapphire Rapids and later), where auto keeps avx512 (below)
};

CpuFeatures detect_features() {
  CpuFeatures f;
#if defined(ALEXCONV_CPU_HAS_AVX2) && (defined(__x86_64__) || defined(_M_X64))
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  f.avx2 = f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#if defined(ALEXCONV_CPU_HAS_AVX512)
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
#if defined(ALEXCONV_CPU_HAS_AVX512_BF16)
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
  f.amx_bf16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22));  // CPUID.7.0:EDX[22]
#endif
#endif
  return f;
}

const CpuFeatures& features() {
  static const CpuFeatures f = detect_features();
  return f;
}

// ALEXCONV_CPU_KERNEL (read once per process): unset, empty or "auto" lets the op choose;
// baseline, avx2, avx512, avx512_bf16, avx512_bf16_emulated or aten force that path for every
// call, where this CPU and build can run it. An unknown or unsupported value fails every call with the reason.
struct Forced {
  bool forced = false;
  Path path = Path::kBaseline;
  std::string error;
};

Forced parse_forced() {
  const char* env = std::getenv("ALEXCONV_CPU_KERNEL");
  const std::string value = env ? env : "";
  Forced f;
  if (value.empty() || value == "auto") return f;
  f.forced = true;
  const CpuFeatures& cpu = features();
  if (value == "baseline") {
    f.path = Path::kBaseline;
  } else if (value == "aten") {
    f.path = Path::kAten;
  } else if (value == "avx2") {
    f.path = Path::kAvx2;
    if (!cpu.avx2) {
#if defined(ALEXCONV_CPU_HAS_AVX2)
      f.error = "ALEXCONV_CPU_KERNEL=avx2, but this CPU lacks AVX2, FMA or F16C";
#else
      f.error = "ALEXCONV_CPU_KERNEL=avx2, but this build has no AVX2 kernel (x86-64 only)";
#endif
    }
  } else if (value == "avx512") {
    f.path = Path::kAvx512;
    if (!cpu.avx512) {
#if defined(ALEXCONV_CPU_HAS_AVX512)
      f.error = "ALEXCONV_CPU_KERNEL=avx512, but this CPU lacks one of AVX-512 F, BW, DQ, VL "
                "(or AVX2, FMA, F16C)";
#else
      f.error = "ALEXCONV_CPU_KERNEL=avx512, but this build has no AVX-512 kernel (x86-64 only)";
#endif
    }
  } else if (value == "avx512_bf16" || value == "avx512_bf16_emulated") {
    const bool emulated = value == "avx512_bf16_emulated";
    f.path = emulated ? Path::kAvx512Bf16Emulated : Path::kAvx512Bf16;
#if !defined(ALEXCONV_CPU_HAS_AVX512)
    f.error = "ALEXCONV_CPU_KERNEL=" + value + ", but this build has no AVX-512 kernel (x86-64 only)";
#else
    if (!cpu.avx512) {
      f.error = "ALEXCONV_CPU_KERNEL=" + value + ", but this CPU lacks one of AVX-512 F, BW, DQ, VL "
                "(or AVX2, FMA, F16C)";
    } else if (!emulated && !cpu.avx512_bf16) {
#if defined(ALEXCONV_CPU_HAS_AVX512_BF16)
      f.error = "ALEXCONV_CPU_KERNEL=avx512_bf16, but this CPU lacks AVX512-BF16";
#else
      f.error = "ALEXCONV_CPU_KERNEL=avx512_bf16, but this build has no AVX512-BF16 kernel (its "
                "compiler lacks -mavx512bf16)";
#endif
    }
#endif
  } else {
    f.error = "ALEXCONV_CPU_KERNEL must be auto, baseline, avx2, avx512, avx512_bf16, "
              "avx512_bf16_emulated or aten, got '" + value + "'";
  }
  return f;
}

// The path a call takes. Unforced: the micro-kernel for ATen's CPU capability (so
// ATEN_CPU_CAPABILITY steers both, as for ATen's own kernels), for every dtype. bfloat16 on
// CPUs with bfloat16 dot products once went to oneDNN's convolution (faster than our kernel,
// which widens bfloat16 to float32), until oneDNN's bfloat16 convolution on a Sapphire Rapids
// (AMX, torch 2.11) gave wrong results: relative norm error 0.63 at 230x7 (one output column),
// and Inf/NaN not propagated as F.conv2d's float64 rule (docs/perf-notes.md, "The CPU kernel").
Path choose_path() {
  static const Forced forced = parse_forced();
  TORCH_CHECK(forced.error.empty(), "alexconv::conv1: ", forced.error);
  if (forced.forced) return forced.path;
  const CpuFeatures& cpu = features();
  const std::string capability = compat::cpu_capability();
  // bfloat16 dot products where predicted faster than widening to float: CPUs with AVX512-BF16
  // and no AMX (Zen 4, whose one 512-bit FMA a cycle the dot products match: 198 of them per 16
  // channels and pixel against 363 FMAs). Intel's server cores with AMX have two 512-bit FMA
  // ports, so there the float kernel may be as fast: avx512 until measured (docs/perf-notes.md,
  // "The CPU kernel").
  if (capability == "AVX512" && cpu.avx512_bf16 && !cpu.amx_bf16) return Path::kAvx512Bf16;
  if (capability == "AVX512" && cpu.avx512) return Path::kAvx512;
  if ((capability == "AVX2" || capability == "AVX512") && cpu.avx2) return Path::kAvx2;
  return Path::kBaseline;
}

const cpu::Kernel& kernel_for(Path path) {
#if defined(ALEXCONV_CPU_HAS_AVX512_BF16)
  static const cpu::Kernel avx512_bf16 = cpu::avx512_bf16_kernel();
  if (path == Path::kAvx512Bf16) return avx512_bf16;
#endif
#if defined(ALEXCONV_CPU_HAS_AVX512)
  static const cpu::Kernel avx512 = cpu::avx512_kernel();
  if (path == Path::kAvx512) return avx512;
  static const cpu::Kernel avx512_bf16_emulated = cpu::avx512_bf16_emulated_kernel();
  if (path == Path::kAvx512Bf16Emulated) return avx512_bf16_emulated;
#endif
#if defined(ALEXCONV_CPU_HAS_AVX2)
  static const cpu::Kernel avx2 = cpu::avx2_kernel();
  if (path == Path::kAvx2) return avx2;
#endif
  static const cpu::Kernel baseline = cpu::baseline_kernel();
  TORCH_INTERNAL_ASSERT(path == Path::kBaseline, "no CPU kernel for ", path_name(path, at::kFloat));
  return baseline;
}

struct Strides4 {
  int64_t n, c, h, w;
  explicit Strides4(const at::Tensor& t)
      : n(t.stride(0)), c(t.stride(1)), h(t.stride(2)), w(t.stride(3)) {}
};

// Output channels rounded up to whole channel blocks: the kernel's packed weights and bias
// hold zeros past the call's channels.
int64_t padded_channels(int64_t channels, int64_t channel_block) {
  return (channels + channel_block - 1) / channel_block * channel_block;
}

// Weights as float in the kernel's packing; any weight strides (even zero) work. The kernel's
// own packer where it has one (contiguous float32); else tap by tap within a block, the
// block's channels read 363 apart and written side by side (twice a 4-d accessor walk's
// speed: docs/perf-notes.md, "The CPU code's choices").
template <typename scalar_t>
std::unique_ptr<float[]> pack_weights(const at::Tensor& weight, const cpu::Kernel& kernel) {
  const int64_t channel_block = kernel.channel_block;
  const int64_t channels = weight.size(0), padded = padded_channels(channels, channel_block);
  // Every element is written below: no zero fill.
  std::unique_ptr<float[]> packed(new float[padded * kTaps]);
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (kernel.pack_weights && weight.is_contiguous()) {
      kernel.pack_weights(compat::const_data_ptr<float>(weight), channels, packed.get());
      return packed;
    }
  }
  const scalar_t* w = compat::const_data_ptr<scalar_t>(weight);
  const Strides4 ws(weight);
  int64_t tap_offset[kTaps];
  for (int64_t ci = 0, t = 0; ci < kInChannels; ++ci)
    for (int64_t r = 0; r < kKernel; ++r)
      for (int64_t s = 0; s < kKernel; ++s, ++t) tap_offset[t] = ci * ws.c + r * ws.h + s * ws.w;
  for (int64_t c0 = 0; c0 < padded; c0 += channel_block) {
    float* dst = packed.get() + c0 * kTaps;
    const int64_t real = std::min(channel_block, channels - c0);
    for (int64_t t = 0; t < kTaps; ++t, dst += channel_block) {
      const scalar_t* src = w + c0 * ws.n + tap_offset[t];
      for (int64_t k = 0; k < real; ++k) dst[k] = static_cast<float>(src[k * ws.n]);
      std::fill(dst + real, dst + channel_block, 0.f);
    }
  }
  return packed;
}

template <typename scalar_t>
std::vector<float> bias_as_float(const c10::optional<at::Tensor>& bias, int64_t channels,
                                 int64_t channel_block) {
  std::vector<float> out(padded_channels(channels, channel_block), 0.f);
  if (bias.has_value() && bias->defined()) {
    const auto b = bias->accessor<scalar_t, 1>();
    for (int64_t co = 0; co < channels; ++co) out[co] = static_cast<float>(b[co]);
  }
  return out;
}

// dst[x] = float(src[x * stride]) for x < n. Unit strides in loops the compiler vectorises: a
// strided scalar loop for every layout made staging a tenth of a call.
template <typename scalar_t>
void widen(const scalar_t* src, int64_t stride, int64_t n, float* dst) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (stride == 1) {
      std::memcpy(dst, src, n * sizeof(float));
      return;
    }
  } else if constexpr (std::is_same_v<scalar_t, at::BFloat16>) {
    if (stride == 1) {  // bfloat16 is float's upper half
      const uint16_t* bits = reinterpret_cast<const uint16_t*>(src);
      for (int64_t x = 0; x < n; ++x) {
        const uint32_t word = static_cast<uint32_t>(bits[x]) << 16;
        std::memcpy(dst + x, &word, sizeof(word));
      }
      return;
    }
  }
  for (int64_t x = 0; x < n; ++x) dst[x] = static_cast<float>(src[x * stride]);
}

// Copies input rows [iy0, iy0 + rows) x columns [ix0, ix0 + cols) of one image into
// dst ([3][rows][cols], float), with zeros wherever that range leaves the image.
// float16 rows go through the kernel's widen_float16 and channels-last rows through its split3
// where it has them (row_tmp: 3 * cols floats, for 16-bit channels-last rows).
template <typename scalar_t>
void stage_input(const cpu::Kernel& kernel, const scalar_t* image, const Strides4& is, int64_t height,
                 int64_t width, int64_t iy0, int64_t rows, int64_t ix0, int64_t cols, float* dst,
                 float* row_tmp) {
  const int64_t x_begin = std::clamp<int64_t>(-ix0, 0, cols);
  const int64_t x_end = std::clamp<int64_t>(width - ix0, x_begin, cols);
  const int64_t n = x_end - x_begin, plane = rows * cols;
  // Channels-last pixels (3 values side by side): one pass splits a row into its planes.
  const bool interleaved = is.c == 1 && is.w == kInChannels;
  for (int64_t r = 0; r < rows; ++r) {
    float* d[kInChannels];
    for (int64_t ci = 0; ci < kInChannels; ++ci) d[ci] = dst + ci * plane + r * cols;
    const int64_t iy = iy0 + r;
    if (iy < 0 || iy >= height) {
      for (float* row : d) std::fill(row, row + cols, 0.f);
      continue;
    }
    for (float* row : d) {
      std::fill(row, row + x_begin, 0.f);
      std::fill(row + x_end, row + cols, 0.f);
    }
    const scalar_t* src = image + iy * is.h + (ix0 + x_begin) * is.w;
    if (interleaved) {
      // The row's 3n values as floats, then split into the planes.
      const float* values = row_tmp;
      if constexpr (std::is_same_v<scalar_t, float>) {
        values = src;
      } else if constexpr (std::is_same_v<scalar_t, at::Half>) {
        if (kernel.widen_float16) {
          kernel.widen_float16(reinterpret_cast<const uint16_t*>(src), kInChannels * n, row_tmp);
        } else {
          widen(src, 1, kInChannels * n, row_tmp);
        }
      } else {
        widen(src, 1, kInChannels * n, row_tmp);
      }
      float* d0 = d[0] + x_begin;
      float* d1 = d[1] + x_begin;
      float* d2 = d[2] + x_begin;
      if (kernel.split3) {
        kernel.split3(values, n, d0, d1, d2);
        continue;
      }
      for (int64_t x = 0; x < n; ++x) {
        d0[x] = values[3 * x];
        d1[x] = values[3 * x + 1];
        d2[x] = values[3 * x + 2];
      }
      continue;
    }
    if constexpr (std::is_same_v<scalar_t, at::Half>) {
      if (kernel.widen_float16 && is.w == 1) {
        const uint16_t* bits = reinterpret_cast<const uint16_t*>(src);
        for (int64_t ci = 0; ci < kInChannels; ++ci) kernel.widen_float16(bits + ci * is.c, n, d[ci] + x_begin);
        continue;
      }
    }
    for (int64_t ci = 0; ci < kInChannels; ++ci) widen(src + ci * is.c, is.w, n, d[ci] + x_begin);
  }
}

// How the output splits into bands: row_bands x col_bands per image, each band's rows and
// columns as even as can be (band i of k covers [extent * i / k, extent * (i + 1) / k)).
// Results do not depend on it: each output is summed in one order.
struct BandGrid {
  int64_t row_bands, col_bands;
  int64_t max_rows, max_cols;  // the largest band's extent

  // Band `item` of batch x row_bands x col_bands: its image, first output row and column, and
  // extent.
  struct Item {
    int64_t n, y0, x0, rows, cols;
  };
  Item item(int64_t i, int64_t out_h, int64_t out_w) const {
    const int64_t row_band = i / col_bands % row_bands, col_band = i % col_bands;
    const int64_t y0 = out_h * row_band / row_bands, y1 = out_h * (row_band + 1) / row_bands;
    const int64_t x0 = out_w * col_band / col_bands, x1 = out_w * (col_band + 1) / col_bands;
    return {i / (row_bands * col_bands), y0, x0, y1 - y0, x1 - x0};
  }
};

int64_t divide_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The fewest bands of at most kMaxBandRows x kMaxBandCols whose count the threads share
// evenly (at::parallel_for gives each thread one run of ceil(items / threads) items): at
// batch 1 on 2 threads, 8 bands of 6-7 rows of the 55, where halving the band height until
// each thread had four bands gave 14 bands of 4 rows, staging far more input rows than it
// computes. Where no count up to twice the fewest divides evenly: rows halved until each
// thread has four bands.
BandGrid band_grid(int64_t batch, int64_t out_h, int64_t out_w) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  BandGrid g;
  g.col_bands = divide_up(out_w, kMaxBandCols);
  const int64_t fewest = divide_up(out_h, kMaxBandRows);
  g.row_bands = 0;
  for (int64_t rb = fewest; rb <= std::min(out_h, 2 * fewest + threads); ++rb) {
    if (batch * g.col_bands * rb % threads == 0) {
      g.row_bands = rb;
      break;
    }
  }
  if (g.row_bands == 0) {
    int64_t rows = kMaxBandRows;
    while (rows > 1 && batch * g.col_bands * divide_up(out_h, rows) < 4 * threads) rows /= 2;
    g.row_bands = divide_up(out_h, rows);
  }
  g.max_rows = divide_up(out_h, g.row_bands);
  g.max_cols = divide_up(out_w, g.col_bands);
  return g;
}

// A fresh output of a large call is memory the kernel is about to write in full. glibc maps
// blocks of 32 MB and more anew on every allocation (its largest mapping threshold), and Linux
// faults them in a 4 KB page at a time: a quarter of a large call's time on 2 cores. Advised
// to use transparent huge pages (where THP is in "madvise" mode; "always" has them anyway),
// the 2 MB-aligned inside of the output faults in 2 MB at a time. Only from 32 MB: smaller
// outputs may be reused heap memory, where the advice cost time instead (docs/perf-notes.md,
// "The CPU code's choices"). The advice covers only the output's own pages and changes no value.
constexpr int64_t kHugePageAdviceBytes = int64_t(32) << 20;
void advise_huge_pages(void* data, int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (bytes < kHugePageAdviceBytes) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + static_cast<uintptr_t>(bytes)) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice only
#else
  (void)data;
  (void)bytes;
#endif
}

template <typename scalar_t>
void conv1_cpu_impl(const cpu::Kernel& kernel, const at::Tensor& input, const at::Tensor& weight,
                    const c10::optional<at::Tensor>& bias, int64_t pad, bool relu, at::Tensor& out) {
  const int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  const int64_t channels = out.size(1), out_h = out.size(2), out_w = out.size(3);
  const std::unique_ptr<float[]> weights = pack_weights<scalar_t>(weight, kernel);
  const std::vector<float> bias_f = bias_as_float<scalar_t>(bias, channels, kernel.channel_block);

  const BandGrid grid = band_grid(batch, out_h, out_w);

  const scalar_t* in_ptr = compat::const_data_ptr<scalar_t>(input);
  scalar_t* out_ptr = compat::mutable_data_ptr<scalar_t>(out);
  advise_huge_pages(out_ptr, out.numel() * static_cast<int64_t>(sizeof(scalar_t)));
  const Strides4 is(input), os(out);
  constexpr cpu::OutType out_type = std::is_same_v<scalar_t, float>    ? cpu::OutType::kFloat32
                                    : std::is_same_v<scalar_t, at::Half> ? cpu::OutType::kFloat16
                                                                         : cpu::OutType::kBFloat16;

  at::parallel_for(0, batch * grid.row_bands * grid.col_bands, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> staged(kInChannels * window_extent(grid.max_rows) * window_extent(grid.max_cols));
    std::vector<float> row_tmp(std::is_same_v<scalar_t, float> ? 0 : kInChannels * window_extent(grid.max_cols));
    for (int64_t item = begin; item < end; ++item) {
      const auto [n, y0, x0, rows, cols] = grid.item(item, out_h, out_w);
      const int64_t in_rows = window_extent(rows), in_cols = window_extent(cols);
      stage_input(kernel, in_ptr + n * is.n, is, height, width, kStride * y0 - pad, in_rows,
                  kStride * x0 - pad, in_cols, staged.data(), row_tmp.data());
      const cpu::Band band{staged.data(), in_rows * in_cols, in_cols, rows, cols,
                           out_ptr + n * os.n + y0 * os.h + x0 * os.w, out_type,
                           os.c, os.h, os.w, channels, relu};
      kernel.run_band(band, weights.get(), bias_f.data());
    }
  });
}

// bfloat16 on a kernel with run_band_pairs: conv1_cpu_impl's bands, each staged as pairs of rows
// (cpu::stage_pairs). A run of output rows whose windows are too small for the dot products'
// flushing (cpu::pairs_keep_precision; zeros, or inputs and weights near 2^-64 and below) takes
// the float kernel instead, on the band staged as floats. Every output row's path depends on its
// own window and the weights only, not on the bands: the same bits whatever the thread count.
void conv1_cpu_bf16_pairs(const cpu::Kernel& kernel, const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias, int64_t pad, bool relu, at::Tensor& out) {
  const int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  const int64_t channels = out.size(1), out_h = out.size(2), out_w = out.size(3);
  const int64_t block = kernel.channel_block;
  std::unique_ptr<uint32_t[]> pair_weights(new uint32_t[padded_channels(channels, block) * cpu::kPairTaps]);
  const cpu::Strides ws = {weight.stride(0), weight.stride(1), weight.stride(2), weight.stride(3)};
  const uint16_t w_max = cpu::pack_weight_pairs(reinterpret_cast<const uint16_t*>(compat::const_data_ptr<at::BFloat16>(weight)),
                                                ws, channels, block, pair_weights.get());
  // The float kernel's weights only where some row needs them (rarely: tiny magnitudes).
  std::unique_ptr<float[]> weights;
  std::once_flag weights_packed;
  const std::vector<float> bias_f = bias_as_float<at::BFloat16>(bias, channels, block);

  const BandGrid grid = band_grid(batch, out_h, out_w);
  const at::BFloat16* in_ptr = compat::const_data_ptr<at::BFloat16>(input);
  at::BFloat16* out_ptr = compat::mutable_data_ptr<at::BFloat16>(out);
  advise_huge_pages(out_ptr, out.numel() * static_cast<int64_t>(sizeof(at::BFloat16)));
  const Strides4 is(input), os(out);
  const cpu::Strides in_strides = {is.n, is.c, is.h, is.w};

  at::parallel_for(0, batch * grid.row_bands * grid.col_bands, 1, [&](int64_t begin, int64_t end) {
    const int64_t max_cols = window_extent(grid.max_cols);
    std::vector<uint32_t> pairs(kInChannels * cpu::pair_plane_size(grid.max_rows, max_cols));
    std::vector<uint32_t> tails(kInChannels * cpu::tail_plane_size(grid.max_rows, max_cols));
    std::vector<uint16_t> row_max(grid.max_rows), row_tmp(2 * max_cols);
    std::vector<float> staged, row_tmp_f;  // the float kernel's, where a band needs it
    for (int64_t item = begin; item < end; ++item) {
      const auto [n, y0, x0, rows, cols] = grid.item(item, out_h, out_w);
      const int64_t in_rows = window_extent(rows), in_cols = window_extent(cols);
      const at::BFloat16* image = in_ptr + n * is.n;
      cpu::stage_pairs(reinterpret_cast<const uint16_t*>(image), in_strides, height, width, kStride * y0 - pad, rows,
                       kStride * x0 - pad, in_cols, pairs.data(), tails.data(), row_max.data(), row_tmp.data());
      cpu::Band band{nullptr, in_rows * in_cols, in_cols, rows, cols, out_ptr + n * os.n + y0 * os.h + x0 * os.w,
                     cpu::OutType::kBFloat16, os.c, os.h, os.w, channels, relu};
      band.pairs = pairs.data();
      band.tails = tails.data();
      band.pair_plane_pitch = cpu::pair_plane_size(rows, in_cols);
      band.tail_plane_pitch = cpu::tail_plane_size(rows, in_cols);
      for (int64_t y = 0; y < rows;) {
        const bool exact = cpu::pairs_keep_precision(row_max[y], w_max);
        int64_t run_end = y + 1;
        while (run_end < rows && cpu::pairs_keep_precision(row_max[run_end], w_max) == exact) ++run_end;
        cpu::Band part = band;
        part.out_rows = run_end - y;
        part.out = static_cast<at::BFloat16*>(band.out) + y * os.h;
        if (exact) {
          part.pairs = band.pairs + 2 * y * in_cols;
          part.tails = band.tails + y * in_cols;
          kernel.run_band_pairs(part, pair_weights.get(), bias_f.data());
        } else {
          if (staged.empty()) {
            staged.resize(kInChannels * window_extent(grid.max_rows) * max_cols);
            row_tmp_f.resize(kInChannels * max_cols);
          }
          if (band.image == nullptr) {  // once per band
            stage_input(kernel, image, is, height, width, kStride * y0 - pad, in_rows, kStride * x0 - pad, in_cols,
                        staged.data(), row_tmp_f.data());
            band.image = staged.data();
          }
          part.image = staged.data() + kStride * y * in_cols;
          std::call_once(weights_packed, [&] { weights = pack_weights<at::BFloat16>(weight, kernel); });
          kernel.run_band(part, weights.get(), bias_f.data());
        }
        y = run_end;
      }
    }
  });
}

at::Tensor conv1_cpu(const at::Tensor& input, const at::Tensor& weight,
                     const c10::optional<at::Tensor>& bias, bool /*allow_tf32*/, int64_t padding,
                     bool relu) {
  check_conv1_args(input, weight, bias, padding);
  const Path path = choose_path();
  // The output is empty exactly where the batch is (the checks leave every other extent >= 1).
  if (input.size(0) == 0) return conv1_empty_output(input, weight, padding);
  // ATen's convolution allocates its own output: ours is allocated only for our kernels.
  if (path == Path::kAten) return conv1_cpu_aten(input, weight, bias, padding, relu);
  at::Tensor out = conv1_empty_output(input, weight, padding);
  const cpu::Kernel& kernel = kernel_for(path);
  switch (input.scalar_type()) {
    case at::kFloat: conv1_cpu_impl<float>(kernel, input, weight, bias, padding, relu, out); break;
    case at::kHalf: conv1_cpu_impl<at::Half>(kernel, input, weight, bias, padding, relu, out); break;
    case at::kBFloat16:
      if (kernel.run_band_pairs) {
        conv1_cpu_bf16_pairs(kernel, input, weight, bias, padding, relu, out);
      } else {
        conv1_cpu_impl<at::BFloat16>(kernel, input, weight, bias, padding, relu, out);
      }
      break;
    default: TORCH_INTERNAL_ASSERT(false, "check_conv1_args let ", input.scalar_type(), " through");
  }
  return out;
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, CPU, m) {
  m.impl("conv1", &alexconv::conv1_cpu);
  m.impl("conv1_kernel", [](const at::Tensor& input, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias, bool, int64_t padding,
                            bool) -> std::string {
    alexconv::check_conv1_args(input, weight, bias, padding);
    return alexconv::path_name(alexconv::choose_path(), input.scalar_type());
  });
}
