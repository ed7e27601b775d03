// The producer warps' loops: stage each (tile, input channel) window into a ring
// slot -- TMA, cp.async or element loads (window_staging.cuh) -- and convert it into
// MMA operand words.
#pragma once

#include <cstdint>

#include "../arch/cp_async.cuh"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../common/ring.cuh"
#include "../common/role_barriers.cuh"
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
      if (wait_for_slot) barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
      issue_window_tma(slots + pos.slot * kSlotElems, window_map, plan, at.tile, at.channel,
                       &ring.landed[pos.slot]);
      if constexpr (kOwnWarp) barrier_arrive(&ring.full[pos.slot], 32);
    }
  } else {
    if (at.valid(plan)) {
      if (wait_for_slot) barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
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
      barrier_wait(&ring.landed[convert_pos.slot], convert_pos.phase);
    } else {
      copy_async_wait<F::kStages - 2>();  // this thread's copies of convert_at's window landed
      // Any producer converts any unit: all of them wait for the others' copies.
      if constexpr (sizeof(typename Mode::Raw) == 4) producer_barrier();
    }
    convert_window<Mode, kConverters>(slot, convert_at.tile, pitch, warp, lane, round);
    // A later TMA copy overwrites what the conversion wrote.
    if constexpr (kTma && sizeof(typename Mode::Raw) == 4) fence_async_proxy();
    barrier_arrive(&ring.full[convert_pos.slot]);
    convert_at.advance(plan);
    convert_pos.advance();
    if constexpr (!kOwnWarp) {
      issue_stage<Mode, kStaging, F>(p, window_map, plan, slots, ring, copy_at, copy_pos, true, warp,
                                  lane);
    }
  }
}

// Producer warps, other 16-bit windows: element loads through registers; the
// loads of a stage are in flight while its slot is still being read.
template <class Mode, class F>
__device__ void produce_registers(const Problem& p, const TilePlan& plan,
                                  typename Mode::Word* slots, RingBarriers<F::kStages>& ring,
                                  mma::Round round, int warp, int lane) {
  typename Mode::Raw regs[kLoadsPerThread];
  StageCursor<TilePlan> at(plan);
  RingPos<F::kStages> pos;
  while (at.valid(plan)) {
    load_window<Mode>(regs, p, at.tile, at.channel, warp, lane);
    barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
    store_window<Mode>(slots + pos.slot * kSlotElems, regs, at.tile, int(plan.pitch), warp, lane,
                       round);
    barrier_arrive(&ring.full[pos.slot]);
    at.advance(plan);
    pos.advance();
  }
}

}  // namespace igemm
}  // namespace cuda
}  // namespace alexconv
