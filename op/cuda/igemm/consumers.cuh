// The consumer warps' loop: per stage, multiply the slot's window by the channel's
// B (either mainloop); after a tile's last channel, the epilogue stores it.
#pragma once

#include <cstdint>

#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../common/epilogue.cuh"
#include "../common/ring.cuh"
#include "../common/tile_votes.cuh"
#include "../common/weight_packing.cuh"
#include "mainloop_sm80.cuh"
#include "mainloop_sm90.cuh"
#include "pixel_map.cuh"
#include "smem_layout.cuh"

namespace alexconv {
namespace cuda {
namespace igemm {

// Consumer warps: per stage, multiply the slot's window by the channel's B;
// after a tile's last channel, store (the accumulators began at the bias). Modes that scale
// their weights (kScalesWeights: mma::Float32AsHalf) start from zero, and at the store scale back
// by `unscale` and add the bias -- unless the producers voted the tile exact
// (RingBarriers::votes), which they then store themselves.
template <class Mode, DType T, bool kWgmma, class F>
__device__ void consume(const Problem& p, const TilePlan& plan, const typename Mode::Word* slots,
                        RingBarriers<F::kStages>& ring, const uint4* b_frag, const int4* koff,
                        const float* bias, uint16_t* staged, float unscale, int warp, int lane) {
  constexpr bool kScaled = kScalesWeights<Mode>;
  StageCursor<TilePlan> at(plan);
  RingPos<F::kStages> pos;
  PixelRows rows = pixel_rows<kWgmma, sizeof(typename Mode::Raw)>(at.tile, plan, p, warp, lane >> 2);
  float acc[kMTiles][F::kNTiles][4];
  const auto restart = [&] {
    if constexpr (kScaled) {
      zero_accumulators(acc);
    } else {
      init_accumulators(acc, bias, lane & 3);
    }
  };
  restart();
  const uint32_t padding = padding_cols<Mode>(lane & 3);
  while (at.valid(plan)) {
    ring.consumer_wait(pos);
    __syncwarp();  // the warp-collective MMAs need the whole warp back together
    const typename Mode::Word* window = slots + pos.slot * kSlotElems;
    if constexpr (kWgmma) {
      // The channel's B address, the same in every lane, read from lane 0: ptxas then
      // knows it is warp-uniform and builds each wgmma's descriptor in uniform
      // registers (otherwise two R2UR moves per wgmma, 48 of a channel's ~386
      // instructions in fp32).
      const uint32_t b_channel = __shfl_sync(
          0xffffffffu,
          smem_address(b_frag) + at.channel * kSteps * Mode::kWgBlocks * wgmma::kBlockBytes, 0);
      multiply_channel_wgmma<Mode>(acc, window, b_channel, koff, rows, padding, lane);
    } else {
      multiply_channel<Mode>(acc, window,
                             b_frag + at.channel * kSteps * Mode::template kChunksOf<F::kNTiles> * 32,
                             koff, rows, padding, lane);
    }
    const bool last = at.channel == kInChannels - 1;
    // Read before the slot is released: the producers write its next tile's vote after.
    const bool exact =
        kScaled && last && TileVotes::exact(*reinterpret_cast<const volatile uint32_t*>(&ring.votes[pos.slot]));
    ring.consumer_release(pos);
    pos.advance();
    if (last && kScaled && !exact) {
      unscale_accumulators(acc, unscale);  // a power of two: exact
      add_bias(acc, bias, lane & 3);
    }
    if (last && exact) {
      restart();
    } else if (last) {
      if constexpr (SmemLayout<Mode, F>::kStagedStores) {
        store_tile_staged<T>(acc, staged, p, warp, lane, p.out_pixel_major, [&](int local) -> int64_t {
          const int q = int(at.tile.q_begin) + local;
          if (local >= plan.tile_pixels || q >= at.tile.q_end) return -1;
          return place_pixel(at.tile, p, q).out;
        });
      } else {
        store_tile(acc, rows.out, p, lane & 3, p.out_pixel_major);
      }
      restart();
    }
    if (at.advance(plan)) {
      rows = pixel_rows<kWgmma, sizeof(typename Mode::Raw)>(at.tile, plan, p, warp, lane >> 2);
    }
  }
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
