// The portable space-to-depth implicit GEMM (sm_80+: Ampere, Ada, Hopper, Blackwell):
// s2d.cu's problem, plan, windows and producers, with mma.sync consumers that load both
// operands from shared memory by ldmatrix -- so, as on Hopper, the consumer warps issue
// loads and MMAs and nothing else, where the register-gather kernel (igemm/) builds every A
// fragment from single 16-bit loads.
//
// The fits: a CTA holds B for all 96 output channels (Whole: 158,208 bytes in 16 bits, 130,176 in
// float32; A100's 163 KB and Hopper's 227 KB) or for one of two groups of 48 (Halves: 98,304 /
// 79,104 bytes, every sm_80+ GPU's 99 KB; the groups of a tile run side by side and stage the
// same windows, the second reading them from L2). Beside B, three window slots of 12 KB (planes
// of 384 cells; a window starts at its tile's first pixel, Plan::from_tile, so 224 to 256 take
// one strip): the producers stage up to two stages ahead of the consumers. In Halves a tile
// needs six consumer warps of two m-tiles each (a B fragment serves both), so the twelve form
// two teams that take tiles in turn, one team's epilogue beside the other's MMAs
// (mma_sync_consumers.cuh); where rows allow the producers load column pairs (16-bit ones three
// stages ahead, pair_producers.cuh). In 16 bits the kernel is bound by shared-memory wavefronts
// and load latency; in bf16x3 by the two-slot ring between one multiplying team and the
// producers (perf-notes).
//
// Modes: fp16, bf16, float32 with allow_tf32 multiplied as fp16 (mma::HalfOfFloat, with the
// range guard of s2d.cu: tiles fp16 cannot hold are stored exactly by the producers), and
// float32 accurate as bf16x3, whose hi and lo planes and blocks double the windows and B: its
// fits are Halves on the A100 class and three groups of 32 channels (Thirds) in 99 KB.
//
// The parts: plan.h, ring.cuh, prologue.cuh and producers.cuh (shared with s2d.cu),
// pair_producers.cuh and mma_sync_consumers.cuh; this file holds the kernel, its shared-memory
// layout and the launch.
#include "../catalog.h"
#include "../kernel_api.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/smem.cuh"
#include "../common/channel_groups.cuh"
#include "../common/dtype.cuh"
#include "../common/occupancy.h"
#include "../common/operand_modes.cuh"
#include "../common/warp_roles.h"
#include "half_of_float.cuh"
#include "mma_sync_consumers.cuh"
#include "plan.h"
#include "pair_producers.cuh"
#include "producers.cuh"
#include "prologue.cuh"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {
namespace {

// How the kernel fits a GPU's shared memory: kGroups CTAs share a tile's 96 output channels,
// each holding its group's B, beside kSlots window slots of planes of kRecords cells; its
// consumer warps own kMTiles m-tiles each (two for 48 channels: a warp's B fragments serve twice
// the MMAs; 96 channels leave no registers for that; three for bf16x3's 32) and form kMTiles
// teams that take tiles in turn (mma_sync_consumers.cuh).
template <int kGroups_, int kSlots_, int kMTiles_, int kRecords_>
struct Fit {
  static constexpr int kGroups = kGroups_;
  static constexpr int kSlots = kSlots_;
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kRecords = kRecords_;
  // Load units per producer thread a window of kRecords cells can need (ring.cuh).
  static constexpr int kMostUnits = (2 * kRecords + kProducerThreads - 1) / kProducerThreads;
  static constexpr int kConsumers = kConsumerThreads / kMTiles;  // the threads that release a slot
  static constexpr int kChannels = int(kOutChannels) / kGroups;
  static constexpr int kNTiles = kChannels / 8;
  static_assert(kChannels * kGroups == kOutChannels && kNTiles % 2 == 0, "n-tiles in pairs per group");
};
// Halves: three slots of 384-cell planes (224 to 256 in one strip; wider images take more
// strips), so the producers stage a window while the consumers still read the one before it.
using Whole = Fit<1, 3, 1, 384>;
using Halves = Fit<2, 3, 2, 384>;
// bf16x3's hi and lo planes and blocks double the slots and B: in 99 KB three groups of 32
// channels beside two slots of 352-cell planes (224 to 256 in one strip), and warps of three
// m-tiles: three teams of four, one warp per SM sub-partition multiplying (teams of six left two
// sub-partitions one warp each, the others two: 0.655 ms against 0.609, perf-notes).
using Thirds = Fit<3, 2, 3, 352>;

// The fits a mode tries, widest first: 16-bit words in Whole, then Halves; bf16x3 in Halves
// (A100, Hopper), then Thirds.
template <class Mode>
struct FitsOf {
  using Wide = Whole;
  using Narrow = Halves;
};
template <>
struct FitsOf<mma::Bf16x3> {
  using Wide = Halves;
  using Narrow = Thirds;
};

template <class Mode, class F>
struct Layout {
  using Raw = typename Mode::Raw;
  static constexpr size_t kB = size_t(kInChannels) * kTapSteps * kTapBytesOf<Mode, F::kNTiles>;
  static constexpr size_t kTapsAt = kB;
  static constexpr size_t kBiasAt = kTapsAt + kTapSteps * 16;
  static constexpr size_t kLargestAt = kBiasAt + kOutChannels * sizeof(float);  // the weight scale's scratch
  static constexpr size_t kRingAt = kLargestAt + kTileThreads / 32 * sizeof(uint32_t);
  static constexpr size_t kTurnsAt = kRingAt + sizeof(Ring<F::kSlots>);
  static constexpr size_t kSlotsAt = (kTurnsAt + sizeof(TeamTurns) + 127) / 128 * 128;
  // The slots hold a channel's raw weights while B is packed.
  static constexpr size_t kRawBytes = size_t(F::kChannels) * kTapsPerChannel * sizeof(Raw);
  static constexpr size_t kSlotsBytes = std::max(size_t(F::kSlots) * kSlotBytesOf<Mode, F::kRecords>, kRawBytes);
  static constexpr size_t kStagedAt = kSlotsAt + kSlotsBytes;
  // 16-bit outputs leave through the staged epilogue, float32 ones straight.
  static constexpr size_t kStagedBytes =
      Staged<Mode>::kHalfOutputs ? kConsumerWarps / 4 * kStagedElemsOf<F::kNTiles> * sizeof(uint16_t) : 0;
  static constexpr size_t kTotal = kStagedAt + kStagedBytes;
  static_assert(Mode::kWgBlocks == (Staged<Mode>::kSplit ? 2 : 1), "bf16x3: hi and lo blocks and planes");
  static_assert(kRingAt % 8 == 0 && kTurnsAt % 8 == 0, "barriers stay aligned");
};

// The budgets the fits exist for (the compile check fails where one grows past them).
static_assert(Layout<mma::Half<false>, Halves>::kTotal <= kSmem99KB && Layout<mma::HalfOfFloat, Halves>::kTotal <= kSmem99KB,
              "the halves fit every sm_80+ GPU");
static_assert(Layout<mma::Half<false>, Whole>::kTotal <= kSmemA100 && Layout<mma::HalfOfFloat, Whole>::kTotal <= kSmemA100,
              "the whole B fits an A100");
static_assert(Layout<mma::Bf16x3, Halves>::kTotal <= kSmemA100 && Layout<mma::Bf16x3, Thirds>::kTotal <= kSmem99KB,
              "bf16x3: halves on an A100, thirds on every sm_80+ GPU");

// Each group's view of the call (group_problem), made on the host: CTAs of grid row y read
// theirs in place from the parameters, as the other kernels read theirs (a copy made in the
// kernel lives in local memory).
template <int kGroups>
struct GroupProblems {
  Problem of[kGroups];
};

// How the producers stage windows, kUnits units per thread (6-8): element loads
// (s2d/producers.cuh), or column pairs where the rows allow, 16-bit ones up to two stages ahead
// (pair_producers.cuh).
enum class Staging { kElements, kPairs };

template <class Mode, DType T, int kUnits, class F, Staging kStaging>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_s2d_mma_sync_kernel(const __grid_constant__ GroupProblems<F::kGroups> problems,
                              const __grid_constant__ Plan plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // ldmatrix, mma.sync m16n8k16 and mbarriers need sm_80; dispatch.cpp never launches it here
#else
  using L = Layout<Mode, F>;
  using Raw = typename Mode::Raw;
  static_assert(std::is_same_v<Raw, typename Storage<T>::type>, "mode matches dtype");
  const Problem& p = problems.of[F::kGroups == 1 ? 0 : blockIdx.y];
  extern __shared__ __align__(16) unsigned char smem[];
  Ring<F::kSlots>& ring = *reinterpret_cast<Ring<F::kSlots>*>(smem + L::kRingAt);
  float* bias = reinterpret_cast<float*>(smem + L::kBiasAt);
  unsigned char* slots = smem + L::kSlotsAt;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  TeamTurns& turns = *reinterpret_cast<TeamTurns*>(smem + L::kTurnsAt);
  if (tid == 0) {  // published by prepare's fence and CTA barrier
    for (int t = 0; t < kMaxTeams; ++t) {
      barrier_init(&turns.handoff[t], F::kConsumers);
      barrier_init(&turns.stored[t], F::kConsumers);
    }
  }
  WeightScale weight_scale;
  const Round round = prepare<Mode, T, F::kSlots, F::kNTiles, F::kConsumers>(
      p, ring, smem + L::kTapsAt, bias, reinterpret_cast<uint4*>(smem), reinterpret_cast<Raw*>(slots),
      reinterpret_cast<uint32_t*>(smem + L::kLargestAt), weight_scale, tid);
  if (warp < kConsumerWarps) {
    consume_mma_sync<Mode, T, F::kNTiles, F::kMTiles, F::kSlots, F::kRecords>(p, plan, ring, turns, smem_address(slots), smem_address(smem), bias,
                                                     reinterpret_cast<uint16_t*>(smem + L::kStagedAt),
                                                     weight_scale.inverse, warp, lane);
  } else {
    if constexpr (kStaging == Staging::kPairs) {
      produce_pairs<Mode, T, kUnits, F::kSlots, F::kChannels, F::kRecords>(p, plan, slots, ring, round,
                                                                           warp - kConsumerWarps, lane);
    } else {
      produce<Mode, T, kUnits, F::kSlots, F::kChannels, F::kRecords>(p, plan, slots, ring, round,
                                                                    warp - kConsumerWarps, lane);
    }
  }
#endif
}

template <class Mode, DType T, int kUnits, class F, Staging kStaging>
cudaError_t launch_fit(const Problem& p, const Plan& plan, const DeviceInfo& device, cudaStream_t stream) {
  constexpr auto kernel = conv1_s2d_mma_sync_kernel<Mode, T, kUnits, F, kStaging>;
  constexpr size_t kSmem = Layout<Mode, F>::kTotal;
  int per_sm = 0;
  const cudaError_t err = resident_ctas_per_sm<kernel>(kSmem, kTileThreads, per_sm);
  if (err != cudaSuccess) return err;
  // A persistent grid, the groups of a tile side by side; none wholly past the weight's channels.
  const int groups = launched_groups(p.out_channels, F::kChannels);
  GroupProblems<F::kGroups> problems;
  for (int g = 0; g < F::kGroups; ++g) {
    problems.of[g] = group_problem<F::kChannels, int(sizeof(typename Mode::Raw))>(p, g);
  }
  const int64_t grid = std::min<int64_t>(plan.tiles, std::max<int64_t>(int64_t(per_sm) * device.sm_count / groups, 1));
  kernel<<<dim3(unsigned(grid), unsigned(groups)), kTileThreads, kSmem, stream>>>(problems, plan);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

// The widest of the mode's fits this device's shared memory takes (groups 0: none), and its plane size.
struct FitChoice {
  int groups = 0, records = 0;
};
template <class Mode>
FitChoice fit_on(const DeviceInfo& device) {
  using Wide = typename FitsOf<Mode>::Wide;
  using Narrow = typename FitsOf<Mode>::Narrow;
  if (Layout<Mode, Wide>::kTotal <= device.max_smem_per_block_optin) return {Wide::kGroups, Wide::kRecords};
  if (Layout<Mode, Narrow>::kTotal <= device.max_smem_per_block_optin) return {Narrow::kGroups, Narrow::kRecords};
  return {};
}

// The plan of a fit with planes of `records` cells: windows from each tile's first pixel (the
// launch and s2d_mma_sync_facts, which the dispatcher reads, plan alike).
Plan plan_for(const Problem& p, int records) {
  return make_plan(p.batch, p.out_h, p.out_w, records, /*from_tile=*/true);
}

// The fit's plan (its plane size) and load units per thread.
template <class Mode, DType T, class F>
cudaError_t launch_planned(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  const Plan plan = plan_for(p, F::kRecords);
  if (plan.strips == 0) return cudaErrorInvalidValue;
  if (plan.tiles == 0) return cudaSuccess;
  const int units = units_per_thread(plan);
  if (units == kFewestUnits) {  // windows of up to 384 cells (s2d_mma_sync_facts)
    if (pairs_apply(p)) return launch_fit<Mode, T, kFewestUnits, F, Staging::kPairs>(p, plan, device, stream);
    return launch_fit<Mode, T, kFewestUnits, F, Staging::kElements>(p, plan, device, stream);
  }
  // Wider planes need more units (448 cells: 7, 512: 8); the fits of 384 cells instantiate none.
  if constexpr (F::kMostUnits > kFewestUnits) {
    if (units == kFewestUnits + 1) return launch_fit<Mode, T, kFewestUnits + 1, F, Staging::kElements>(p, plan, device, stream);
  }
  if constexpr (F::kMostUnits > kFewestUnits + 1) {
    static_assert(F::kMostUnits == kFewestUnits + 2, "planes of up to 512 cells");
    return launch_fit<Mode, T, F::kMostUnits, F, Staging::kElements>(p, plan, device, stream);
  }
  return cudaErrorInvalidValue;  // make_plan keeps a window within the fit's planes
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  using Wide = typename FitsOf<Mode>::Wide;
  using Narrow = typename FitsOf<Mode>::Narrow;
  const int groups = fit_on<Mode>(device).groups;
  if (groups == Wide::kGroups) return launch_planned<Mode, T, Wide>(p, device, stream);
  if (groups == Narrow::kGroups) return launch_planned<Mode, T, Narrow>(p, device, stream);
  return cudaErrorInvalidValue;  // callers ask s2d_mma_sync_facts first
}

FitChoice fit_for(const Problem& p, const DeviceInfo& device) {
  switch (p.dtype) {
    case DType::kFloat32: return p.allow_tf32 ? fit_on<mma::HalfOfFloat>(device) : fit_on<mma::Bf16x3>(device);
    case DType::kFloat16: return fit_on<mma::Half<false>>(device);
    case DType::kBFloat16: return fit_on<mma::Half<true>>(device);
  }
  return {};
}

}  // namespace
}  // namespace s2d

S2dMmaSyncFacts s2d_mma_sync_facts(const Problem& p, const DeviceInfo& device) {
  S2dMmaSyncFacts facts;
  if (device.major < 8) return facts;
  const s2d::FitChoice fit = s2d::fit_for(p, device);
  if (fit.groups == 0) return facts;
  const s2d::Plan plan = s2d::plan_for(p, fit.records);
  if (plan.strips == 0) return facts;
  facts.groups = fit.groups;
  facts.tiles = plan.tiles;
  facts.pair_staging = s2d::units_per_thread(plan) == s2d::kFewestUnits && s2d::pairs_apply(p);
  return facts;
}

cudaError_t launch_conv1_s2d_mma_sync(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? s2d::launch_typed<mma::HalfOfFloat, DType::kFloat32>(p, device, stream)
                          : s2d::launch_typed<mma::Bf16x3, DType::kFloat32>(p, device, stream);
    case DType::kFloat16: return s2d::launch_typed<mma::Half<false>, DType::kFloat16>(p, device, stream);
    case DType::kBFloat16: return s2d::launch_typed<mma::Half<true>, DType::kBFloat16>(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
