// Split kernels: the CTAs of grid row blockIdx.y compute output channels
// [y * kChannels, (y + 1) * kChannels) and hold only that group's weights (the register
// gather's Halves and Quarters fits, the portable space-to-depth kernel). The groups of a
// tile run side by side, so the second reads the input window from L2.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"  // ALEXCONV_HOST_DEVICE
#include "../kernel_api.h"

namespace alexconv {
namespace cuda {

// The problem as group `group`'s CTAs see it: the weights, bias and output from the group's
// first channel, and the weight's channels from there (Problem::out_channels: more than
// kChannels for every group but the last; the launch starts no group past them).
template <int kChannels, int kElemBytes>
ALEXCONV_HOST_DEVICE inline Problem group_problem(const Problem& p, int group) {
  Problem g = p;
  const int64_t c0 = int64_t(group) * kChannels;
  constexpr int64_t bytes = kElemBytes;
  g.weight = static_cast<const char*>(p.weight) + c0 * p.weight_stride[0] * bytes;
  if (p.bias) g.bias = static_cast<const char*>(p.bias) + c0 * p.bias_stride * bytes;
  g.output = static_cast<char*>(p.output) + c0 * p.out_stride[1] * bytes;
  g.out_channels = p.out_channels - c0;
  return g;
}

// The groups a call launches: those with a channel of the weight's.
inline int launched_groups(int64_t out_channels, int channels_per_group) {
  return int((out_channels + channels_per_group - 1) / channels_per_group);
}

}  // namespace cuda
}  // namespace alexconv
