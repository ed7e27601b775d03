// The space-to-depth kernel's consumer warps (s2d.cu): per stage, 9 taps of
// wgmmas with both operands in shared memory; per tile, the epilogue (with one or
// two accumulator sets).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../arch/tma.cuh"
#include "../arch/wgmma.cuh"
#include "../common/epilogue.cuh"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../common/tile_order.h"  // Divider, strip_columns, kMaxIndex
#include "../common/warp_roles.h"
#include "plan.h"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {

// One tap of one stage: acc += A (64 records, `a` 16-byte units into `window`) x B
// (the tap's blocks, `b` units into `weights`). A record is one unit.
template <class Mode>
__device__ __forceinline__ void multiply_tap(float (&acc)[mma::kNTiles][4], const wgmma::Operand& window,
                                             uint32_t a, const wgmma::Operand& weights, uint32_t b) {
  constexpr uint32_t kPlane = kPlaneRecords, kBlock = wgmma::kBlockUnits;
  if constexpr (std::is_same_v<Mode, mma::Bf16x3>) {
    // Small terms first, as in the register engine.
    wgmma::bf16_m64n96k16_ss(acc, window.at(a + 2 * kPlane), weights.at(b));
    wgmma::bf16_m64n96k16_ss(acc, window.at(a), weights.at(b + kBlock));
    wgmma::bf16_m64n96k16_ss(acc, window.at(a), weights.at(b));
  } else if constexpr (Mode::kIsBf16) {
    wgmma::bf16_m64n96k16_ss(acc, window.at(a), weights.at(b));
  } else {
    wgmma::f16_m64n96k16_ss(acc, window.at(a), weights.at(b));
  }
}

// The consumer warps' side of the ring: per stage, 9 taps of MMAs on the slot's
// window; a stage's MMAs run while the next stage's are issued, and its slot is
// released once they are done. Every wgmma wait sits on a path the compiler can
// follow (the stage loops are unrolled): a wait under a data-dependent branch makes
// ptxas serialise every wgmma of the kernel (C7518). kPixelMajor: see kPixelMajorKernels.
template <class Mode, DType T, bool kPixelMajor>
struct Consumer {
  const Problem& p;
  const Plan& plan;
  Ring<Staged<Mode>::kSlots>& ring;
  const uint32_t slots, b_all;  // shared-memory addresses
  const float* bias;
  uint16_t* staged;
  const float unscale;  // mma::Float32AsHalf: B holds the weights times its inverse
  const int warp, lane;
  RingPos<Staged<Mode>::kSlots> pos;
  int in_flight = -1;  // the slot of the stage whose MMAs may still run
  int parity = 0;      // of the tile count

  // Issues stage (tile, channel)'s MMAs into acc, then releases the stage before it.
  // `base`: the tile's first pixel's cell in its window (Tile::base).
  __device__ __forceinline__ void stage(float (&acc)[kMTiles][mma::kNTiles][4], int base,
                                        int channel) {
    const uint32_t wv = uint32_t(plan.wv);
    ring.consumer_wait(pos);
    __syncwarp();  // the warpgroup-collective MMAs need the whole warp back together
    // Records are K-major core-matrix rows: planes kPlaneBytes apart, 8 pixels 128 bytes.
    const uint32_t starts = wgmma::uniform_starts(
        slots + pos.slot * Staged<Mode>::kSlotBytes + uint32_t(base + (warp >> 2) * 64) * kRecordBytes,
        b_all + channel * kTapSteps * Mode::kWgBlocks * wgmma::kBlockBytes);
    const auto window = wgmma::Operand::from_start(starts & 0xffffu, kPlaneBytes, 8 * kRecordBytes);
    const auto weights = wgmma::blocks_from_start(starts >> 16);
    wgmma::fence();
#pragma unroll
    for (int dy = 0; dy < kTaps1D; ++dy) {
#pragma unroll
      for (int dx = 0; dx < kTaps1D; ++dx) {
        multiply_tap<Mode>(acc[0], window, dy * wv + dx, weights,
                           (dy * kTaps1D + dx) * Mode::kWgBlocks * wgmma::kBlockUnits);
      }
    }
    wgmma::commit();
    if (in_flight >= 0) {
      wgmma::wait<1>();  // the previous stage's MMAs are done with its slot
      ring.consumer_release(in_flight);
    }
    in_flight = pos.slot;
    pos.advance();
  }
  // Waits for the last stage's MMAs: acc is final and nothing is in flight.
  __device__ __forceinline__ void drain(float (&acc)[kMTiles][mma::kNTiles][4]) {
    wgmma::wait<0>();
    wgmma::fence_accumulators(acc[0]);
    ring.consumer_release(in_flight);
    in_flight = -1;
  }
  // A tile's three stages into acc, which starts at zero (accumulators set from loaded
  // values before the wait loop make ptxas serialise every wgmma, C7520), the first
  // stage before `meanwhile` runs.
  template <class Meanwhile>
  __device__ __forceinline__ void multiply(float (&acc)[kMTiles][mma::kNTiles][4], int base,
                                           const Meanwhile& meanwhile) {
    zero_accumulators(acc);
    stage(acc, base, 0);
    meanwhile();
#pragma unroll
    for (int channel = 1; channel < kInChannels; ++channel) stage(acc, base, channel);
    drain(acc);
  }
  // Adds the bias and stores a multiplied tile (the producers store one TileVotes
  // sends to the exact path: the votes are the same in every consumer thread, so
  // their group barriers match).
  __device__ __forceinline__ void store(float (&acc)[kMTiles][mma::kNTiles][4], const Tile& tile) {
    const bool exact = TileVotes::exact(ring.votes[parity]);
    parity ^= 1;
    if (exact) return;
    if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) unscale_accumulators(acc, unscale);
    add_bias(acc, bias, lane & 3);
    if constexpr (Staged<Mode>::kHalfOutputs) {
      store_tile_staged<T>(acc, staged, p, warp, lane, kPixelMajor,
                           [&](int local) { return place_pixel(plan, tile, p, local).out; });
    } else {
      store_tile(acc, thread_rows(plan, tile, p, warp, lane >> 2).out, p, lane & 3,
                 p.out_pixel_major);
    }
  }
};

// Consumer warps, one accumulator set: multiply a tile, store it, next.
template <class Mode, DType T, bool kPixelMajor>
__device__ void consume(Consumer<Mode, T, kPixelMajor> c) {
  for (int64_t index = blockIdx.x; index < c.plan.tiles; index += gridDim.x) {
    const Tile tile = decode_tile(c.plan, index);
    float acc[kMTiles][mma::kNTiles][4];
    c.multiply(acc, int(tile.base), [] {});
    c.store(acc, tile);
  }
}

// Consumer warps, two accumulator sets (where RegisterSplit gives them the
// registers): a tile's first stage of MMAs runs while the tile before it is
// stored, so the tensor cores do not wait out the whole epilogue. Tiles are kept as
// indices and decoded where needed: the registers go to the accumulators.
template <class Mode, DType T, bool kPixelMajor>
__device__ void consume_overlapped(Consumer<Mode, T, kPixelMajor> c) {
  using Acc = float[kMTiles][mma::kNTiles][4];
  const auto base_of = [&](int64_t index) { return int(decode_tile(c.plan, index).base); };
  // Multiplies tile `index` into `next` while `done` (the tile before) is stored.
  const auto step = [&](Acc& next, Acc& done, int64_t index) {
    c.multiply(next, base_of(index), [&] { c.store(done, decode_tile(c.plan, index - gridDim.x)); });
  };
  int64_t index = blockIdx.x;
  if (index >= c.plan.tiles) return;
  Acc acc0, acc1;
  c.multiply(acc0, base_of(index), [] {});
  // The sets alternate: the loop is unrolled by two so that each is a fixed array
  // (register-allocated), and every wgmma wait stays on a path ptxas can follow.
  bool last_in_0 = true;  // which set holds the last multiplied tile
  while (index + gridDim.x < c.plan.tiles) {
    step(acc1, acc0, index += gridDim.x);
    last_in_0 = false;
    if (index + gridDim.x >= c.plan.tiles) break;
    step(acc0, acc1, index += gridDim.x);
    last_in_0 = true;
  }
  // Nothing is in flight here; `index` is the last tile.
  const Tile tile = decode_tile(c.plan, index);
  if (last_in_0) {
    c.store(acc0, tile);
  } else {
    c.store(acc1, tile);
  }
}

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
