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
// (consumers_sm80.cuh); where rows allow the producers load column pairs (16-bit ones three
// stages ahead, pair_producers.cuh). In 16 bits the kernel is bound by shared-memory wavefronts
// and load latency; in bf16x3 by the two-slot ring between one multiplying team and the
// producers (docs/perf-notes.md, "The portable space-to-depth kernel").
//
// Modes: fp16, bf16, float32 with allow_tf32 multiplied as fp16 (mma::Float32AsHalf, with the
// range guard of s2d.cu: tiles fp16 cannot hold are stored exactly by the producers), and
// float32 accurate as bf16x3, whose hi and lo planes and blocks double the windows and B: its
// fits are Halves on the A100 class and three groups of 32 channels (Thirds) in 99 KB.
//
// The parts: plan.h, ring.cuh, prologue.cuh and producers.cuh (shared with s2d.cu),
// pair_producers.cuh and consumers_sm80.cuh; this file holds the kernel, its shared-memory
// layout and the launch.
#include "../launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/smem.cuh"
#include "../common/channel_groups.cuh"
#include "../common/dtype.cuh"
#include "../common/occupancy.h"
#include "../common/operand_modes.cuh"
#include "../common/warp_roles.h"
#include "../common/weight_scale.cuh"
#include "consumers_sm80.cuh"
#include "../s2d/plan.h"
#include "pair_producers.cuh"
#include "../s2d/producers.cuh"
#include "../s2d/prologue.cuh"
#include "../s2d/ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {
namespace {

// How the kernel fits a GPU's shared memory: kGroups CTAs share a tile's 96 output channels,
// each holding its group's B, beside kSlots window slots of planes of kRecords cells; its
// consumer warps own kMTiles m-tiles each (two for 48 channels: a warp's B fragments serve twice
// the MMAs; 96 channels leave no registers for that; three for bf16x3's 32) and form kMTiles
// teams that take tiles in turn (consumers_sm80.cuh).
template <int kGroups_, int kSlots_, int kMTiles_, int kRecords_>
struct FitShape {
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
using Whole = FitShape<1, 3, 1, 384>;
using Halves = FitShape<2, 3, 2, 384>;
// bf16x3's hi and lo planes and blocks double the slots and B: in 99 KB three groups of 32
// channels beside two slots of 352-cell planes (224 to 256 in one strip), and warps of three
// m-tiles: three teams of four, one warp per SM sub-partition multiplying (teams of six, leaving
// two sub-partitions one warp each and the others two, measured slower: docs/perf-notes.md, "The
// measurements behind the code's choices").
using Thirds = FitShape<3, 2, 3, 352>;

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
static_assert(Layout<mma::Half<false>, Halves>::kTotal <= kSmem99KB && Layout<mma::Float32AsHalf, Halves>::kTotal <= kSmem99KB,
              "the halves fit every sm_80+ GPU");
static_assert(Layout<mma::Half<false>, Whole>::kTotal <= kSmemA100 && Layout<mma::Float32AsHalf, Whole>::kTotal <= kSmemA100,
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

// How the producers stage windows, kUnits units per thread (6-8): element loads (kLoads,
// s2d/producers.cuh), or column pairs where the rows allow (kPairs), 16-bit ones up to two
// stages ahead (pair_producers.cuh).

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
cudaError_t launch_kernel(const LaunchPlan& plan, cudaStream_t stream) {
  constexpr auto kernel = conv1_s2d_mma_sync_kernel<Mode, T, kUnits, F, kStaging>;
  constexpr size_t kSmem = Layout<Mode, F>::kTotal;
  // A persistent grid, the groups of a tile side by side; none wholly past the weight's channels.
  const Problem& p = plan.problem;
  const int groups = launched_groups(p.out_channels, F::kChannels);
  int64_t grid = 0;
  const cudaError_t err = persistent_grid<kernel>(kSmem, kTileThreads, plan.tiles, plan.sm_count, groups, grid);
  if (err != cudaSuccess) return err;
  GroupProblems<F::kGroups> problems;
  for (int g = 0; g < F::kGroups; ++g) {
    problems.of[g] = group_problem<F::kChannels, int(sizeof(typename Mode::Raw))>(p, g);
  }
  kernel<<<dim3(unsigned(grid), unsigned(groups)), kTileThreads, kSmem, stream>>>(problems, plan.s2d);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

// The kernel of the plan's units per thread and staging (those plan_fit gives).
template <class Mode, DType T, class F>
cudaError_t launch_staged(const LaunchPlan& plan, cudaStream_t stream) {
  if (plan.units == kFewestUnits) {  // windows of up to 384 cells
    if (plan.staging == Staging::kPairs) return launch_kernel<Mode, T, kFewestUnits, F, Staging::kPairs>(plan, stream);
    return launch_kernel<Mode, T, kFewestUnits, F, Staging::kLoads>(plan, stream);
  }
  // Wider planes need more units (448 cells: 7, 512: 8); the fits of 384 cells instantiate none.
  if constexpr (F::kMostUnits > kFewestUnits) {
    if (plan.units == kFewestUnits + 1) return launch_kernel<Mode, T, kFewestUnits + 1, F, Staging::kLoads>(plan, stream);
  }
  if constexpr (F::kMostUnits > kFewestUnits + 1) {
    static_assert(F::kMostUnits == kFewestUnits + 2, "planes of up to 512 cells");
    return launch_kernel<Mode, T, F::kMostUnits, F, Staging::kLoads>(plan, stream);
  }
  return cudaErrorInvalidValue;  // make_plan keeps a window within the fit's planes
}

// The plan in fit F: windows from each tile's first pixel (Plan::from_tile) in planes of the
// fit's cells, and column pairs where the rows allow.
template <class Mode, class F>
std::optional<LaunchPlan> plan_fit(const Problem& p, LaunchPlan plan) {
  plan.fit = cuda::Fit(F::kGroups);
  plan.smem = Layout<Mode, F>::kTotal;
  plan.s2d = make_plan(p.batch, p.out_h, p.out_w, F::kRecords, /*from_tile=*/true, p.pad);
  if (plan.s2d.strips == 0) return std::nullopt;
  plan.tiles = plan.s2d.tiles;
  plan.units = units_per_thread(plan.s2d);
  plan.staging = plan.units == kFewestUnits && pairs_apply(p) ? Staging::kPairs : Staging::kLoads;
  return plan;
}

// The mode's fit layouts (FitsOf) as `visit` sees them: the plan's.
template <class Mode, class Visit>
auto visit_fit(cuda::Fit fit, Visit&& visit) {
  using Wide = typename FitsOf<Mode>::Wide;
  using Narrow = typename FitsOf<Mode>::Narrow;
  return groups_of(fit) == Wide::kGroups ? visit(Wide{}) : visit(Narrow{});
}

}  // namespace
}  // namespace s2d

// The widest of the mode's fits this device's shared memory takes.
std::optional<LaunchPlan> plan_s2d_mma_sync(const Problem& p, const DeviceInfo& device) {
  if (device.major < 8) return std::nullopt;
  const LaunchPlan plan =
      plan_of_kernel(Kernel::kS2dMmaSync, p, device, operand_mode(p.dtype, p.allow_tf32, /*tf32_words=*/false));
  return visit_mode_without_tf32(plan.mode, std::optional<LaunchPlan>(), [&](auto mode) -> std::optional<LaunchPlan> {
    using Mode = typename decltype(mode)::Mode;
    using Wide = typename s2d::FitsOf<Mode>::Wide;
    using Narrow = typename s2d::FitsOf<Mode>::Narrow;
    if (s2d::Layout<Mode, Wide>::kTotal <= device.max_smem_per_block_optin) return s2d::plan_fit<Mode, Wide>(p, plan);
    if (s2d::Layout<Mode, Narrow>::kTotal <= device.max_smem_per_block_optin) return s2d::plan_fit<Mode, Narrow>(p, plan);
    return std::nullopt;
  });
}

cudaError_t launch_s2d_mma_sync(const LaunchPlan& plan, cudaStream_t stream) {
  if (plan.tiles == 0) return cudaSuccess;
  return visit_mode_without_tf32(plan.mode, cudaErrorInvalidValue, [&](auto mode) {
    using Mode = typename decltype(mode)::Mode;
    constexpr DType T = decltype(mode)::kDType;
    return s2d::visit_fit<Mode>(plan.fit, [&](auto shape) {
      return s2d::launch_staged<Mode, T, decltype(shape)>(plan, stream);
    });
  });
}

}  // namespace cuda
}  // namespace alexconv
