// The producer warps' loops: stage each (tile, input channel) window into a ring
// slot -- TMA, cp.async or element loads (window_staging.cuh) -- and convert it into
// MMA operand words.
#pragma once

#include <cstdint>

#include "../arch/cp_async.cuh"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../common/dtype.cuh"
#include "../common/ring.cuh"
#include "../common/role_barriers.cuh"
#include "../common/tile_votes.cuh"
#include "../common/weight_packing.cuh"
#include "../direct/direct.cuh"
#include "pixel_map.cuh"
#include "smem_layout.cuh"
#include "window_staging.cuh"

namespace alexconv {
namespace cuda {
namespace igemm {

// float32 TMA kernels give their copies a producer warp of their own (its first
// thread issues, and arrives on `full` for the whole warp); the other three convert.
// A copy then leaves as soon as the consumers free its slot, never behind a
// conversion, and the converters never wait on `empty`.
template <class Mode, Staging kStaging>
constexpr bool kCopyWarp = kStaging == Staging::kTma && sizeof(typename Mode::Raw) == 4;
constexpr int kCopyWarpIndex = kProducerWarps - 1;

// Producer warps: issues the copies of stage `at` (if there is one) into its slot
// -- one cp.async group, or one TMA copy by one producer thread -- and moves on to
// the next stage. `wait_for_slot`: the consumers may still be reading that slot
// (false only for the first use of each slot, in the kernel's prologue).
template <class Mode, Staging kStaging, class F>
__device__ void issue_stage(const Problem& p, const void* window_map, const TilePlan& plan,
                            typename Mode::Word* slots, RingBarriers<F::kStages>& ring, StageCursor<TilePlan>& at,
                            RingPos<F::kStages>& pos, bool wait_for_slot, int warp, int lane) {
  if constexpr (kStaging == Staging::kTma) {
    constexpr bool kOwnWarp = kCopyWarp<Mode, kStaging>;
    if (at.valid(plan) && warp == (kOwnWarp ? kCopyWarpIndex : 0) && lane == 0) {
      if (wait_for_slot) ring.producer_acquire(pos);
      issue_window_tma(slots + pos.slot * kSlotElems, window_map, plan, at.tile, at.channel,
                       &ring.landed[pos.slot]);
      if constexpr (kOwnWarp) ring.producer_commit(pos, 32);
    }
  } else {
    if (at.valid(plan)) {
      if (wait_for_slot) ring.producer_acquire(pos);
      issue_window_async<Mode, kStaging == Staging::kCopy16 ? 16 : 4>(
          slots + pos.slot * kSlotElems, p, at.tile, at.channel, int(plan.pitch), warp, lane);
    }
    copy_async_commit();  // possibly empty: one group per stage keeps the wait count fixed
  }
  at.advance(plan);
  pos.advance();
}

// Producer warps, fp32 and aligned 16-bit windows: copies run one stage ahead of
// conversion. The first F::kStages - 1 stages were issued by the kernel's prologue.
template <class Mode, Staging kStaging, class F>
__device__ void produce_async(const Problem& p, const void* window_map, const TilePlan& plan,
                              typename Mode::Word* slots, RingBarriers<F::kStages>& ring, StageCursor<TilePlan>& copy_at,
                              RingPos<F::kStages>& copy_pos, mma::Round round, int warp, int lane) {
  constexpr bool kTma = kStaging == Staging::kTma;
  constexpr bool kOwnWarp = kCopyWarp<Mode, kStaging>;
  constexpr int kConverters = kOwnWarp ? kProducerThreads - 32 : kProducerThreads;
  if constexpr (kOwnWarp) {
    if (warp == kCopyWarpIndex) {
      if (lane == 0) {
        while (copy_at.valid(plan)) {
          issue_stage<Mode, kStaging, F>(p, window_map, plan, slots, ring, copy_at, copy_pos, true,
                                      warp, lane);
        }
      }
      return;
    }
  }
  const int pitch = int(plan.pitch);
  StageCursor<TilePlan> convert_at(plan);
  RingPos<F::kStages> convert_pos;
  while (convert_at.valid(plan)) {
    typename Mode::Word* slot = slots + convert_pos.slot * kSlotElems;
    if constexpr (kTma) {
      ring.wait_landed(convert_pos);
    } else {
      copy_async_wait<F::kStages - 2>();  // this thread's copies of convert_at's window landed
      // Any producer converts any unit: all of them wait for the others' copies.
      if constexpr (sizeof(typename Mode::Raw) == 4) producer_barrier();
    }
    convert_window<Mode, kConverters>(slot, convert_at.tile, pitch, warp, lane, round);
    // A later TMA copy overwrites what the conversion wrote.
    if constexpr (kTma && sizeof(typename Mode::Raw) == 4) fence_async_proxy();
    ring.producer_commit(convert_pos);
    convert_at.advance(plan);
    convert_pos.advance();
    if constexpr (!kOwnWarp) {
      issue_stage<Mode, kStaging, F>(p, window_map, plan, slots, ring, copy_at, copy_pos, true, warp,
                                  lane);
    }
  }
}

// A tile voted exact (mma::Float32AsHalf's range guard, below), stored value by value
// (direct/direct.cuh) by the producer threads while the consumers skip its stores: exact,
// and rare. Inlined: as a call (s2d's is one) it took the addresses of the group's Problem and
// the tile, which then lived in local memory (a 304-byte frame); inlined, 0 bytes, no spill.
template <DType T, class F>
__device__ __forceinline__ void store_exact_tile(const Problem& p, const TilePlan& plan, const Tile& tile,
                                              int thread) {
  using S = typename Storage<T>::type;
  S* out = static_cast<S*>(p.output);
  const int pixels = int(min(plan.tile_pixels, tile.q_end - tile.q_begin));
  const int channels = min(F::kChannels, int(p.out_channels));  // the group's, stored ones
#pragma unroll 1
  for (int e = thread; e < pixels * channels; e += kProducerThreads) {
    const int co = e / pixels;  // consecutive threads, consecutive pixels
    const PixelPlace at = place_pixel(tile, p, int(tile.q_begin) + e % pixels);
    const float v = direct_output<T>(p, tile.n, co, tile.oy0 + at.oy_in_tile, tile.x0 + at.x);
    out[at.out + co * p.out_stride[1]] = relu_output<T>(v, p.relu);
  }
}

// Producer warps, other 16-bit windows, and float32 ones staged as float16 words
// (mma::Float32AsHalf): element loads through registers, or 16-byte ones (kLoads16); the
// loads of a stage are in flight while its slot is still being read. For mma::Float32AsHalf each thread tracks the largest
// magnitude of a tile's inputs; at the tile's last channel the producer warps vote
// (RingBarriers::votes, TileVotes) before their arrival, and store a tile voted exact themselves.
template <class Mode, DType T, Staging kStaging, class F>
__device__ void produce_registers(const Problem& p, const TilePlan& plan,
                                  typename Mode::Word* slots, RingBarriers<F::kStages>& ring,
                                  mma::Round round, int warp, int lane) {
  constexpr bool kGuarded = kScalesWeights<Mode>;
  constexpr bool kUnits = kStaging == Staging::kLoads16;
  static_assert(!kUnits || kGuarded, "16-byte register staging is for float32 as float16 words");
  typename Mode::Raw regs[kUnits ? 1 : kLoadsPerThread];
  float4 units[kUnits ? kUnitsPerThread : 1];
  StageCursor<TilePlan> at(plan);
  RingPos<F::kStages> pos;
  float top = 0.f;  // kGuarded: the largest |x| of this tile's windows so far
  while (at.valid(plan)) {
    typename Mode::Word* slot = slots + pos.slot * kSlotElems;
    if constexpr (kUnits) {
      load_window_units(units, p, at.tile, at.channel, warp * 32 + lane);
      ring.producer_acquire(pos);
      top = fmaxf(top, store_window_units<Mode>(slot, units, at.tile, int(plan.pitch), warp * 32 + lane));
    } else {
      if constexpr (kGuarded) {
#pragma unroll
        for (int i = 0; i < kLoadsPerThread; ++i) regs[i] = 0.f;  // past the window: not seen
      }
      load_window<Mode>(regs, p, at.tile, at.channel, warp, lane);
      ring.producer_acquire(pos);
      store_window<Mode>(slot, regs, at.tile, int(plan.pitch), warp, lane, round);
      if constexpr (kGuarded) {
#pragma unroll
        for (int i = 0; i < kLoadsPerThread; ++i) top = fmaxf(top, fabsf(regs[i]));  // NaN: ignored
      }
    }
    bool exact = false;
    if constexpr (kGuarded) {
      if (at.channel == kInChannels - 1) {
        const uint32_t seen = __reduce_or_sync(0xffffffffu, TileVotes::of_largest(top));
        top = 0.f;
        if (lane == 0) reinterpret_cast<volatile uint8_t*>(&ring.votes[pos.slot])[warp] = uint8_t(seen);
        producer_barrier();  // every producer warp's byte is in
        exact = TileVotes::exact(*reinterpret_cast<volatile uint32_t*>(&ring.votes[pos.slot]));
      }
    }
    ring.producer_commit(pos);
    if (exact) store_exact_tile<T, F>(p, plan, at.tile, warp * 32 + lane);
    at.advance(plan);
    pos.advance();
  }
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
