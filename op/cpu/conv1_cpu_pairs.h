// bfloat16 operands as pairs of taps, for Kernel::run_band_pairs (conv1_cpu_kernel.h): the
// weights packed once per call, each band's input staged as pairs of rows. Plain C++ on
// bfloat16 bits (no torch headers, no instruction-set flags): conv1_cpu.cpp calls it.
#pragma once

#include <cstdint>

#include "conv1_cpu_kernel.h"

namespace alexconv::cpu {

// Strides in elements: [n, c, h, w].
using Strides = int64_t[4];

// Packs `channels` output channels of bfloat16 weights (bits; strides [co, ci, r, s]) as
// [ceil(channels / channel_block)][kPairTaps][channel_block] pairs, zeros past `channels`.
// Returns the largest magnitude among them (bits of a bfloat16 without its sign; NaN as Inf).
uint16_t pack_weight_pairs(const uint16_t* weights, const Strides& strides, int64_t channels,
                           int64_t channel_block, uint32_t* packed);

// Input rows [iy0, iy0 + 4 * (out_rows - 1) + 11) x columns [ix0, ix0 + cols) of one image
// (bits; strides [n, c, h, w], n unused) as Band::pairs and Band::tails (row pitch `cols`),
// zeros wherever the range leaves the image. row_max[y]: the largest magnitude in output row
// y's window rows (as pack_weight_pairs returns it). row_tmp: 2 * cols values.
void stage_pairs(const uint16_t* image, const Strides& strides, int64_t height, int64_t width, int64_t iy0,
                 int64_t out_rows, int64_t ix0, int64_t cols, uint32_t* pairs, uint32_t* tails,
                 uint16_t* row_max, uint16_t* row_tmp);

// Elements of a channel's Band::pairs and Band::tails for out_rows x cols staged columns: pair
// rows 0 to 2 (out_rows - 1) + 4 (output row y reads 2y to 2y + 4), one tail row per output row.
inline int64_t pair_plane_size(int64_t out_rows, int64_t cols) { return (2 * out_rows + 3) * cols; }
inline int64_t tail_plane_size(int64_t out_rows, int64_t cols) { return out_rows * cols; }

// Whether a window of inputs up to x_max and weights up to w_max keeps the op's float32
// contract through run_band_pairs: its dot products flush subnormal operands and sums to zero,
// errors below 2^-126 each, which products of 2^-64 and more (at the largest) leave far below a
// float's rounding. Smaller windows take the float kernel.
bool pairs_keep_precision(uint16_t x_max, uint16_t w_max);

}  // namespace alexconv::cpu
