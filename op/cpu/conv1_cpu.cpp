// CPU backend: splits the output into bands of rows and columns, stages each
// band's input as zero-padded float, and runs the micro-kernel for this CPU's
// instruction set on it (conv1_cpu_kernel.cpp). Float accumulation for every
// dtype; int64 indexing throughout.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../compat.h"
#include "../conv1_checks.h"
#include "../conv1_geometry.h"
#include "conv1_cpu_kernel.h"

namespace alexconv {
namespace {

// A band is at most this many output rows by columns: its staged input (3 x 39 x 263
// floats) stays in L2, and wide images need no more memory than narrow ones.
constexpr int64_t kMaxBandRows = 8;
constexpr int64_t kMaxBandCols = 64;

// Follows ATen's choice (ATEN_CPU_CAPABILITY overrides it, as for ATen's own kernels).
cpu::Kernel select_kernel() {
#if defined(ALEXCONV_CPU_HAS_AVX2)
  const std::string capability = compat::cpu_capability();
  if ((capability == "AVX2" || capability == "AVX512") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    return cpu::avx2_kernel();
  }
#endif
  return cpu::baseline_kernel();
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

// Weights as float in the kernel's packing; any weight strides (even zero) work.
template <typename scalar_t>
std::vector<float> pack_weights(const at::Tensor& weight, int64_t channel_block) {
  const int64_t channels = weight.size(0);
  std::vector<float> packed(padded_channels(channels, channel_block) * kTaps, 0.f);
  const auto w = weight.accessor<scalar_t, 4>();
  for (int64_t co = 0; co < channels; ++co) {
    float* dst = packed.data() + (co / channel_block) * kTaps * channel_block + co % channel_block;
    for (int64_t ci = 0; ci < kInChannels; ++ci)
      for (int64_t r = 0; r < kKernel; ++r)
        for (int64_t s = 0; s < kKernel; ++s)
          dst[((ci * kKernel + r) * kKernel + s) * channel_block] =
              static_cast<float>(w[co][ci][r][s]);
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

// Copies input rows [iy0, iy0 + rows) x columns [ix0, ix0 + cols) of one image into
// dst ([3][rows][cols], float), with zeros wherever that range leaves the image.
template <typename scalar_t>
void stage_input(const scalar_t* image, const Strides4& is, int64_t height, int64_t width,
                 int64_t iy0, int64_t rows, int64_t ix0, int64_t cols, float* dst) {
  const int64_t x_begin = std::clamp<int64_t>(-ix0, 0, cols);
  const int64_t x_end = std::clamp<int64_t>(width - ix0, x_begin, cols);
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < rows; ++r, dst += cols) {
      const int64_t iy = iy0 + r;
      if (iy < 0 || iy >= height) {
        std::fill(dst, dst + cols, 0.f);
        continue;
      }
      std::fill(dst, dst + x_begin, 0.f);
      std::fill(dst + x_end, dst + cols, 0.f);
      const scalar_t* src = image + ci * is.c + iy * is.h + (ix0 + x_begin) * is.w;
      if constexpr (std::is_same_v<scalar_t, float>) {
        if (is.w == 1) {
          std::memcpy(dst + x_begin, src, (x_end - x_begin) * sizeof(float));
          continue;
        }
      }
      for (int64_t x = x_begin; x < x_end; ++x, src += is.w) dst[x] = static_cast<float>(*src);
    }
  }
}

// Output rows per band: the most up to kMaxBandRows that still gives every thread
// several bands. Results do not depend on it: each output is summed in one order.
int64_t band_rows(int64_t batch, int64_t out_h, int64_t col_bands) {
  int64_t rows = kMaxBandRows;
  const int64_t wanted = 4 * at::get_num_threads();
  while (rows > 1 && batch * col_bands * ((out_h + rows - 1) / rows) < wanted) rows /= 2;
  return rows;
}

// For 16-bit outputs: computes the band into float scratch laid out like the output
// (channels innermost for channels_last), then rounds it into place in that order, applying
// relu to the rounded value (so that the result is F.relu of the unfused op's, -0.0 included).
template <typename scalar_t>
void compute_then_round(const cpu::Kernel& kernel, cpu::Band band, bool relu, const float* weights,
                        const float* bias, float* scratch, scalar_t* out, const Strides4& os) {
  const int64_t rows = band.out_rows, cols = band.out_cols, channels = band.channels;
  const bool channels_last = os.c == 1;
  band.out = scratch;
  band.channel_stride = channels_last ? 1 : rows * cols;
  band.row_stride = channels_last ? cols * channels : cols;
  band.col_stride = channels_last ? channels : 1;
  band.relu = false;
  kernel.run_band(band, weights, bias);
  auto round = [&](int64_t c, int64_t y, int64_t x) {
    scalar_t v = static_cast<scalar_t>(
        scratch[c * band.channel_stride + y * band.row_stride + x * band.col_stride]);
    if (relu && v < scalar_t(0)) v = scalar_t(0);  // at::relu's rule: NaN stays NaN
    out[c * os.c + y * os.h + x * os.w] = v;
  };
  if (channels_last) {
    for (int64_t y = 0; y < rows; ++y)
      for (int64_t x = 0; x < cols; ++x)
        for (int64_t c = 0; c < channels; ++c) round(c, y, x);
  } else {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t y = 0; y < rows; ++y)
        for (int64_t x = 0; x < cols; ++x) round(c, y, x);
  }
}

template <typename scalar_t>
void conv1_cpu_impl(const cpu::Kernel& kernel, const at::Tensor& input, const at::Tensor& weight,
                    const c10::optional<at::Tensor>& bias, int64_t pad, bool relu, at::Tensor& out) {
  const int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  const int64_t channels = out.size(1), out_h = out.size(2), out_w = out.size(3);
  const std::vector<float> weights = pack_weights<scalar_t>(weight, kernel.channel_block);
  const std::vector<float> bias_f = bias_as_float<scalar_t>(bias, channels, kernel.channel_block);

  const int64_t col_bands = (out_w + kMaxBandCols - 1) / kMaxBandCols;
  const int64_t max_rows = band_rows(batch, out_h, col_bands);
  const int64_t row_bands = (out_h + max_rows - 1) / max_rows;
  const int64_t max_cols = std::min(out_w, kMaxBandCols);

  const scalar_t* in_ptr = compat::const_data_ptr<scalar_t>(input);
  scalar_t* out_ptr = compat::mutable_data_ptr<scalar_t>(out);
  const Strides4 is(input), os(out);
  constexpr bool kFloatOut = std::is_same_v<scalar_t, float>;

  at::parallel_for(0, batch * row_bands * col_bands, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> staged(kInChannels * window_extent(max_rows) * window_extent(max_cols));
    // Float scratch for 16-bit outputs, which are rounded once at the end.
    std::vector<float> out_f(kFloatOut ? 0 : channels * max_rows * max_cols);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / (row_bands * col_bands);
      const int64_t y0 = item / col_bands % row_bands * max_rows;
      const int64_t x0 = item % col_bands * max_cols;
      const int64_t rows = std::min(max_rows, out_h - y0), cols = std::min(max_cols, out_w - x0);
      const int64_t in_rows = window_extent(rows), in_cols = window_extent(cols);
      stage_input(in_ptr + n * is.n, is, height, width, kStride * y0 - pad, in_rows,
                  kStride * x0 - pad, in_cols, staged.data());

      scalar_t* out_band = out_ptr + n * os.n + y0 * os.h + x0 * os.w;
      cpu::Band band{staged.data(), in_rows * in_cols, in_cols, rows, cols,
                     nullptr, 0, 0, 0, channels, relu};
      if constexpr (kFloatOut) {
        band.out = out_band;
        band.channel_stride = os.c, band.row_stride = os.h, band.col_stride = os.w;
        kernel.run_band(band, weights.data(), bias_f.data());
      } else {
        compute_then_round(kernel, band, relu, weights.data(), bias_f.data(), out_f.data(), out_band, os);
      }
    }
  });
}

at::Tensor conv1_cpu(const at::Tensor& input, const at::Tensor& weight,
                     const c10::optional<at::Tensor>& bias, bool /*allow_tf32*/, int64_t padding,
                     bool relu) {
  check_conv1_args(input, weight, bias, padding);
  at::Tensor out = conv1_empty_output(input, weight, padding);
  if (out.numel() == 0) return out;
  static const cpu::Kernel kernel = select_kernel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "alexconv_conv1_cpu", [&] {
                                    conv1_cpu_impl<scalar_t>(kernel, input, weight, bias, padding, relu, out);
                                  });
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
    return "cpu";
  });
}
