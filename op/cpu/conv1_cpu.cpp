// CPU kernel: per output row, gather the 363 x Wo patch matrix once, then
// multiply it by the weights with a register-blocked micro-kernel that the
// compiler vectorises for AVX-512, AVX2+FMA or the baseline ISA (chosen at run
// time). Float accumulation for every dtype; int64 indexing throughout.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../conv1_checks.h"
#include "../conv1_geometry.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ALEXCONV_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ALEXCONV_ISA_CLONES
#endif

namespace alexconv {
namespace {

// Micro-kernel tile: kChanBlock output channels x kPixBlock output pixels stay
// in registers for the whole 363-long reduction.
constexpr int64_t kChanBlock = 12;
constexpr int64_t kPixBlock = 16;
static_assert(kOutChannels % kChanBlock == 0, "channel blocks must tile 96");

// A row of kPixBlock floats. GCC/Clang vector extensions let every ISA clone of
// the micro-kernel use its own register width (one zmm, two ymm or four xmm).
typedef float PixVec __attribute__((vector_size(kPixBlock * sizeof(float))));

// tile[c][x] = bias[c] + sum_k weight_t[k][c] * patch[k][x], for one tile.
// patch rows have pitch `pitch` (a multiple of kPixBlock, zero padded).
ALEXCONV_ISA_CLONES
void multiply_tile(const float* weight_t, const float* bias, const float* patch,
                   int64_t pitch, float* tile) {
  PixVec acc[kChanBlock];
  for (int64_t c = 0; c < kChanBlock; ++c) acc[c] = PixVec{} + bias[c];
  for (int64_t k = 0; k < kTaps; ++k) {
    PixVec p;
    std::memcpy(&p, patch + k * pitch, sizeof(p));
    const float* w = weight_t + k * kOutChannels;
    for (int64_t c = 0; c < kChanBlock; ++c) acc[c] += w[c] * p;
  }
  std::memcpy(tile, acc, sizeof(acc));
}

struct Strides4 {
  int64_t n, c, h, w;
  explicit Strides4(const at::Tensor& t)
      : n(t.stride(0)), c(t.stride(1)), h(t.stride(2)), w(t.stride(3)) {}
};

template <typename scalar_t>
void conv1_cpu_impl(const at::Tensor& input, const at::Tensor& weight,
                    const std::optional<at::Tensor>& bias, at::Tensor& out) {
  const int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  const int64_t out_h = out.size(2), out_w = out.size(3);
  const int64_t pitch = (out_w + kPixBlock - 1) / kPixBlock * kPixBlock;

  // Weights transposed to [tap][channel] in float, so the micro-kernel reads a
  // contiguous run of channels per tap. Any weight strides (even zero) work.
  std::vector<float> weight_t(kTaps * kOutChannels);
  {
    const auto w = weight.accessor<scalar_t, 4>();
    for (int64_t co = 0; co < kOutChannels; ++co)
      for (int64_t ci = 0; ci < kInChannels; ++ci)
        for (int64_t r = 0; r < kKernel; ++r)
          for (int64_t s = 0; s < kKernel; ++s)
            weight_t[((ci * kKernel + r) * kKernel + s) * kOutChannels + co] =
                static_cast<float>(w[co][ci][r][s]);
  }
  std::vector<float> bias_f(kOutChannels, 0.f);
  if (bias.has_value() && bias->defined()) {
    const auto b = bias->accessor<scalar_t, 1>();
    for (int64_t co = 0; co < kOutChannels; ++co) bias_f[co] = static_cast<float>(b[co]);
  }

  const scalar_t* in_ptr = input.const_data_ptr<scalar_t>();
  scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
  const Strides4 is(input), os(out);

  // One task per (image, output row): big enough to amortise the gather.
  at::parallel_for(0, batch * out_h, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> patch(kTaps * pitch, 0.f);
    float tile[kChanBlock * kPixBlock];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / out_h, oy = item % out_h;
      const scalar_t* img = in_ptr + n * is.n;
      for (int64_t ci = 0; ci < kInChannels; ++ci) {
        for (int64_t r = 0; r < kKernel; ++r) {
          const int64_t iy = oy * kStride - kPad + r;
          const bool row_ok = iy >= 0 && iy < height;
          for (int64_t s = 0; s < kKernel; ++s) {
            float* dst = patch.data() + ((ci * kKernel + r) * kKernel + s) * pitch;
            for (int64_t ox = 0; ox < out_w; ++ox) {
              const int64_t ix = ox * kStride - kPad + s;
              dst[ox] = row_ok && ix >= 0 && ix < width
                            ? static_cast<float>(img[ci * is.c + iy * is.h + ix * is.w])
                            : 0.f;
            }
          }
        }
      }
      scalar_t* out_row = out_ptr + n * os.n + oy * os.h;
      for (int64_t co0 = 0; co0 < kOutChannels; co0 += kChanBlock) {
        for (int64_t x0 = 0; x0 < out_w; x0 += kPixBlock) {
          multiply_tile(weight_t.data() + co0, bias_f.data() + co0, patch.data() + x0,
                        pitch, tile);
          const int64_t xs = std::min(kPixBlock, out_w - x0);
          for (int64_t c = 0; c < kChanBlock; ++c)
            for (int64_t x = 0; x < xs; ++x)
              out_row[(co0 + c) * os.c + (x0 + x) * os.w] =
                  static_cast<scalar_t>(tile[c * kPixBlock + x]);
        }
      }
    }
  });
}

at::Tensor conv1_cpu(const at::Tensor& input, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias, bool /*allow_tf32*/) {
  check_conv1_args(input, weight, bias);
  at::Tensor out = conv1_empty_output(input, weight);
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "alexconv_conv1_cpu", [&] {
                                    conv1_cpu_impl<scalar_t>(input, weight, bias, out);
                                  });
  return out;
}

}  // namespace
}  // namespace alexconv

TORCH_LIBRARY_IMPL(alexconv, CPU, m) {
  m.impl("conv1", &alexconv::conv1_cpu);
}
