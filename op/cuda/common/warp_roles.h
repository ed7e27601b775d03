// The warp roles every implicit-GEMM kernel here shares: 12 consumer warps multiply
// (three wgmma warpgroups of 64 tile pixels; 16 pixels a warp under mma.sync, or 32 in the
// portable space-to-depth kernel's Halves, 48 in its Thirds, whose twelve form two or three teams
// taking tiles in turn) and 4 producer warps stage windows into the family's ring of slots. The
// two roles meet only at the ring's mbarriers (each role also has named barriers of its own,
// listed in arch/named_barriers.cuh).
// Plain C++: the host planners read the tile size too.
#pragma once

namespace alexconv {
namespace cuda {

constexpr int kConsumerWarps = 12;
constexpr int kProducerWarps = 4;
constexpr int kConsumerThreads = 32 * kConsumerWarps;
constexpr int kProducerThreads = 32 * kProducerWarps;
constexpr int kTileThreads = kConsumerThreads + kProducerThreads;
constexpr int kTilePixels = 16 * kConsumerWarps;

}  // namespace cuda
}  // namespace alexconv
