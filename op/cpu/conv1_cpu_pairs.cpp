// bfloat16 pairs for Kernel::run_band_pairs (conv1_cpu_pairs.h).
#include "conv1_cpu_pairs.h"

#include <algorithm>
#include <cstring>

namespace alexconv::cpu {
namespace {

// A bfloat16's magnitude bits, NaN counted as Inf (so that the largest is a number).
inline uint16_t magnitude(uint16_t bits) {
  return static_cast<uint16_t>(std::min<unsigned>(bits & 0x7fffu, 0x7f80u));
}

inline float as_float(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof(f));
  return f;
}

// Row r of the staged range, channel ci, into dst[0, cols): zeros outside the image. Returns
// the row's largest magnitude.
uint16_t load_row(const uint16_t* image, const Strides& strides, int64_t height, int64_t width, int64_t ci,
                  int64_t iy, int64_t ix0, int64_t cols, uint16_t* dst) {
  std::fill(dst, dst + cols, uint16_t(0));
  if (iy < 0 || iy >= height) return 0;
  const int64_t x_begin = std::clamp<int64_t>(-ix0, 0, cols);
  const int64_t x_end = std::clamp<int64_t>(width - ix0, x_begin, cols);
  const uint16_t* src = image + ci * strides[1] + iy * strides[2] + (ix0 + x_begin) * strides[3];
  uint16_t largest = 0;
  for (int64_t x = x_begin; x < x_end; ++x) {
    const uint16_t v = src[(x - x_begin) * strides[3]];
    dst[x] = v;
    largest = std::max(largest, magnitude(v));
  }
  return largest;
}

}  // namespace

uint16_t pack_weight_pairs(const uint16_t* weights, const Strides& strides, int64_t channels,
                           int64_t channel_block, uint32_t* packed) {
  const int64_t blocks = (channels + channel_block - 1) / channel_block;
  uint16_t largest = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t* dst = packed + b * kPairTaps * channel_block;
    for (int64_t ci = 0; ci < kInChannels; ++ci) {
      for (int64_t k = 0; k < kRowPairs; ++k) {
        for (int64_t s = 0; s < kKernel; ++s, dst += channel_block) {
          for (int64_t l = 0; l < channel_block; ++l) {
            const int64_t co = b * channel_block + l;
            if (co >= channels) {
              dst[l] = 0;
              continue;
            }
            const uint16_t* w = weights + co * strides[0] + ci * strides[1] + s * strides[3];
            const uint16_t low = w[2 * k * strides[2]];
            const uint16_t high = 2 * k + 1 < kKernel ? w[(2 * k + 1) * strides[2]] : uint16_t(0);
            largest = std::max({largest, magnitude(low), magnitude(high)});
            dst[l] = static_cast<uint32_t>(low) | static_cast<uint32_t>(high) << 16;
          }
        }
      }
    }
  }
  return largest;
}

void stage_pairs(const uint16_t* image, const Strides& strides, int64_t height, int64_t width, int64_t iy0,
                 int64_t out_rows, int64_t ix0, int64_t cols, uint32_t* pairs, uint32_t* tails,
                 uint16_t* row_max, uint16_t* row_tmp) {
  const int64_t pair_rows = 2 * out_rows + 3, staged_rows = 4 * (out_rows - 1) + kKernel;
  std::fill(row_max, row_max + out_rows, uint16_t(0));
  uint16_t* const low = row_tmp;
  uint16_t* const high = row_tmp + cols;
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    uint32_t* const pair_plane = pairs + ci * pair_plane_size(out_rows, cols);
    uint32_t* const tail_plane = tails + ci * tail_plane_size(out_rows, cols);
    // Pair row k: staged rows 2k and 2k + 1. Row 4y + 10 (k = 2y + 5, its low row) is also
    // output row y's tail; the last one lies past the pair rows.
    for (int64_t k = 0; 2 * k < staged_rows; ++k) {
      const int64_t r = 2 * k;
      const uint16_t low_max = load_row(image, strides, height, width, ci, iy0 + r, ix0, cols, low);
      uint16_t high_max = 0;
      if (k < pair_rows) {
        if (r + 1 < staged_rows) {
          high_max = load_row(image, strides, height, width, ci, iy0 + r + 1, ix0, cols, high);
        } else {
          std::fill(high, high + cols, uint16_t(0));
        }
        uint32_t* dst = pair_plane + k * cols;
        for (int64_t x = 0; x < cols; ++x) dst[x] = static_cast<uint32_t>(low[x]) | static_cast<uint32_t>(high[x]) << 16;
      }
      if (k >= 5 && (k - 5) % 2 == 0) {
        uint32_t* dst = tail_plane + (k - 5) / 2 * cols;
        for (int64_t x = 0; x < cols; ++x) dst[x] = low[x];
      }
      // Output rows whose windows (rows 4y to 4y + 10) hold rows r and r + 1.
      const int64_t first_y = r > kKernel - 1 ? (r - (kKernel - 1) + 3) / 4 : 0;  // 4y + 10 >= r
      for (int64_t y = first_y; y < out_rows && 4 * y <= r + 1; ++y) {
        if (4 * y <= r && r <= 4 * y + kKernel - 1) row_max[y] = std::max(row_max[y], low_max);
        if (4 * y <= r + 1 && r + 1 <= 4 * y + kKernel - 1) row_max[y] = std::max(row_max[y], high_max);
      }
    }
  }
}

bool pairs_keep_precision(uint16_t x_max, uint16_t w_max) {
  return as_float(x_max) * as_float(w_max) >= 0x1p-64f;
}

}  // namespace alexconv::cpu
