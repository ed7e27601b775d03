// What does forming the float32 path's bf16x3 operands cost, at the least? design_floor.cu
// showed the fp32 target (0.25 ms on the H200) within reach of a skeleton whose A operand
// is free: K = 368, windows landed by the copy engine and multiplied as they lie. Every
// design that could really run keeps what that skeleton left out: a split of each input
// into bf16 hi and lo parts, a layout the MMAs can read (the cheapest K any such layout
// allows is 432: a window unit of 8 taps must be 8 adjacent values of one input row, so
// each pixel's 11x11 taps take 12 x 12), and room for it beside B (hi and lo at K = 432:
// 166 KB of the 227 KB). This skeleton adds exactly those, each in its cheapest form:
//   - per (tile, channel) stage the copy engine lands the 19200-byte float32 window in one
//     raw slot (all that is left beside B and two operand slots);
//   - three producer warps split it, each thread taking a 16-byte unit of two adjacent
//     input rows (4 columns each) into one 16-byte unit of a hi plane and one of a lo
//     plane (rows paired so that 8 taps of a pixel are one unit: a 16-byte ldmatrix row or
//     core-matrix row), with the shipped split (op/cuda/common/operand_modes.cuh); the raw slot goes back to
//     the copy engine as soon as they have read it;
//   - the consumers multiply 64 pixels per warpgroup by B, three bf16 MMAs per K step,
//     A either straight from the planes (SS wgmma) or through two ldmatrix.x4 per step and
//     warp (RS wgmma, which reads each A byte once instead of the SS form's hi twice);
//   - no output, or the shipped float32 epilogue to the real NCHW places.
// Beside bf16x3 it prices two ways out: two MMAs per step instead of three (fp16 + e4m3),
// and B streamed a channel per stage, which makes room for four operand slots. And the
// one family with a smaller K: the shipped kernel's per-element register gather at K = 384
// (B 147 KB, four landing slots), its split words taken as landed.
// Left out at zero cost: address and tile arithmetic, the 8-byte skew of a pixel's first
// column in a 16-byte unit, bias, Inf/NaN checks, ragged edges. The same skeleton with A
// free (read from the landed bytes, no producers) is timed beside each form, with its K
// and B, so that the cost of each part reads off as a difference in one run. Measured
// results: fp32_operands-h200.txt; what they mean: docs/perf-notes.md, "The float32
// path's operands".
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I op benchmarks/micro/fp32_operands.cu -o build/fp32_operands
//   build/fp32_operands           (scripts/device/device_check.sh operands)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/common/operand_modes.cuh"  // split_bf16x2: the shipped input split
#include "cuda/arch/mbarrier.cuh"  // mbarriers
#include "cuda/arch/tma.cuh"       // bulk_copy
#include "cuda/arch/wgmma.cuh"
#include "micro_common.cuh"  // CHECK, value_at, hopper_device
#include "skeleton.cuh"      // the geometry, the float32 epilogue, the timing loop

namespace cu = alexconv::cuda;
namespace wg = alexconv::cuda::wgmma;
using skeleton::fill, skeleton::kConsumerGroups, skeleton::kThreads, skeleton::kTiles, skeleton::steps_in_stage;

// How A reaches the MMAs: free (the landed float32 bytes, as design_floor.cu); split by
// the producers into hi and lo planes and read from there by SS wgmmas or by ldmatrix; or
// gathered word by word into registers as the shipped kernel does at K = 384 (its split
// words taken as landed, for free), the one form that needs no 12 x 12 layout.
enum class Form { kFree, kSs, kRs, kGather };
constexpr const char* form_name(Form f) {
  return f == Form::kFree   ? "free (landed bytes, no producers)"
         : f == Form::kSs   ? "split by producers, SS wgmma"
         : f == Form::kRs   ? "split by producers, ldmatrix + RS wgmma"
                            : "shipped register gather, RS wgmma";
}
// MMAs per K step: bf16x3's three, or the one lever left beside them (perf-notes, "Two
// MMAs for float32"): an fp16 hi*hi and one e4m3 k32 for both corrections, from planes
// of the same bytes (SS only: as RS wgmmas, ptxas serialised every pair, C7513).
// None at all prices the producers' own pace.
constexpr const char* mmas_name(int mmas) {
  return mmas == 3 ? "bf16 x3" : mmas == 2 ? "fp16 + e4m3 k32" : "none";
}

constexpr double kTargetMs = 0.25;
constexpr int kMaxSteps = 27;                                 // K = 432
constexpr int kWindowBytes = skeleton::stage_copy_bytes(4);  // 19200: a float32 window
constexpr int kPlaneBytes = kWindowBytes / 2;                 // its hi (or lo) parts in bf16
constexpr int kRowUnits = 57;                                 // 16-byte units of a 228-column row
constexpr int kStageSteps = kMaxSteps / 3;
constexpr int kStageBBytes = kStageSteps * 2 * wg::kBlockBytes;  // a channel's hi and lo blocks, 55296
constexpr int kABlockBytes = 64 * 32;  // 64 rows x 16 K of bf16
constexpr int kConverters = 96;        // producer warps 1-3; warp 0's first thread copies
static_assert(kWindowBytes % (2 * 16) == 0, "planes of whole units");

// Where B lives: resident (all three channels: 166 KB at K = 432, 147 KB at 384), or
// streamed -- a channel's 55 KB per stage, copied from L2 (a packed buffer in global
// memory) into one of two B slots -- which leaves room for four operand slots instead of
// two. Then window slots (free and gather: landing slots; split: slot 0 raw, the others
// planes), and the gather's table of tap offsets.
constexpr int kGatherSteps = 24;  // K = 384: 8 steps per channel (op/cuda/common/operand_modes.cuh's K order)
template <bool kStreamB, int kSteps>
struct Layout {
  static constexpr int kSlotsAt = kStreamB ? 2 * kStageBBytes : kSteps * 2 * wg::kBlockBytes;
  static constexpr int kSlots = kStreamB ? 5 : kSteps == kGatherSteps ? 4 : 3;
  static constexpr int kTableAt = kSlotsAt + kSlots * kWindowBytes;
  static constexpr int kSmemBytes = kTableAt + kGatherSteps / 3 * 4 * 16;
  // + full and empty per slot, per B slot when streamed; + alignment slack.
  static constexpr int kLaunchSmemBytes = kSmemBytes + (2 * kSlots + 4) * 8 + 128;
  static_assert(kLaunchSmemBytes <= 227 * 1024 && kSlotsAt % 128 == 0, "fits an H100/H200 SM, aligned slots");
};

// d += A x B (shared memory, e4m3), K = 32: a bf16 k16's time and operand bytes.
__device__ __forceinline__ void e4m3_m64n96k32_ss(float (&d)[12][4], uint64_t a, uint64_t b) {
  ALEXCONV_WGMMA_SS("m64n96k32.f32.e4m3.e4m3", "1, 1");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The producers' split of one stage: raw window -> hi and lo planes. Unit v of a plane
// holds 4 columns of window row 2p and the same 4 of row 2p + 1 (v = p * 57 + q); the
// odd 21st row pairs with itself.
__device__ __forceinline__ void split_window(const uint4* raw, uint4* hi, uint4* lo, int ctid) {
  constexpr int kUnits = kWindowBytes / 16;
  for (int v = ctid; v < kUnits / 2; v += kConverters) {
    const int first = 2 * (v / kRowUnits) * kRowUnits + v % kRowUnits;
    const int second = first + kRowUnits < kUnits ? first + kRowUnits : first;
    const uint4 a = raw[first], b = raw[second];
    uint32_t h[4], l[4];
    constexpr auto kNearest = cu::mma::Round::kNearest;
    cu::mma::split_bf16x2(__uint_as_float(a.x), __uint_as_float(a.y), h[0], l[0], kNearest);
    cu::mma::split_bf16x2(__uint_as_float(a.z), __uint_as_float(a.w), h[1], l[1], kNearest);
    cu::mma::split_bf16x2(__uint_as_float(b.x), __uint_as_float(b.y), h[2], l[2], kNearest);
    cu::mma::split_bf16x2(__uint_as_float(b.z), __uint_as_float(b.w), h[3], l[3], kNearest);
    hi[v] = make_uint4(h[0], h[1], h[2], h[3]);
    lo[v] = make_uint4(l[0], l[1], l[2], l[3]);
  }
}

// The shipped gather's loads for one step (op/cuda/igemm/a_fragments.cuh, load_step): the thread's words
// of pixel rows g and g + 8 (window offsets `rows`) at its 4 tap columns (offsets k4, from
// the table): adjacent pairs as one 8-byte load in steps 0-6, tap by tap in step 7.
__device__ __forceinline__ void gather_words(uint32_t (&x)[2][4], const uint32_t* window, const int (&rows)[2],
                                             int4 k4, int step) {
  const int ko[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t* at = window + rows[h];
    if (step < cu::mma::kPairedSteps) {
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(at + ko[j]);
        x[h][j] = v.x;
        x[h][j + 1] = v.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) x[h][j] = at[ko[j]];
    }
  }
}

// The tap of col c (0..15) of a step in the shipped K order, and its window offset in words.
__host__ __device__ constexpr int gather_tap(int step, int c) {
  return cu::mma::paired_tap(step * 8 + c / 2, c % 2);
}
constexpr int kWindowPitch = 228, kFirstPaddedStep = cu::mma::kAdjacentPairs / 8;

template <Form kForm, int kSteps, bool kStore, int kMmas, bool kStreamB>
__global__ void __launch_bounds__(kThreads, 1)
    operands_kernel(const uint8_t* in, float* out, const uint8_t* b_global, int tiles) {
  using L = Layout<kStreamB, kSteps>;
  static_assert(kForm != Form::kGather || kSteps == kGatherSteps, "the gather's K order is 8 steps a channel");
  constexpr int kSlots = L::kSlots, kSlotsAt = L::kSlotsAt, kSmemBytes = L::kSmemBytes;
  constexpr int kPlaneSlots = kSlots - 1;
  static_assert(!kStreamB || kSteps == kMaxSteps, "a streamed B is a channel's 9 steps");
  extern __shared__ __align__(16) uint8_t raw_smem[];
  uint8_t* smem = raw_smem + ((128 - (cu::smem_address(raw_smem) & 127)) & 127);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kSmemBytes);
  uint64_t* empty = full + kSlots;
  uint64_t* b_full = empty + kSlots;  // streamed B's two slots
  uint64_t* b_empty = b_full + 2;
  const auto slot_at = [&](int slot) { return smem + kSlotsAt + slot * kWindowBytes; };
  const int tid = threadIdx.x;
  const int group = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform for ptxas (C7520)
  skeleton::fill_operands(smem, L::kTableAt, tid, kThreads);  // the free form reads the slots as they lie
  constexpr bool kSplit = kForm != Form::kFree;
  // Who frees an operand slot: one thread per warpgroup after its MMAs are done (SS and
  // free), every consumer thread after its last ldmatrix (RS).
  static_assert(kMmas == 3 || kForm != Form::kRs, "two MMAs per step: SS only");
  constexpr bool kRegistersA = kForm == Form::kRs || kForm == Form::kGather;
  constexpr int kReleases = kRegistersA ? kConsumerGroups * 128 : kConsumerGroups;
  if (tid < kGatherSteps / 3 * 4) {  // the gather's tap offsets, per (step, t) as the shipped table
    const int step = tid / 4, t = tid % 4;
    int off[4];
    for (int j = 0; j < 4; ++j) {
      const int tap = gather_tap(step, cu::mma::col_k16(t, j));
      off[j] = tap < cu::mma::kTapsPerChannel ? tap / 11 * kWindowPitch + tap % 11 : 0;
    }
    reinterpret_cast<int4*>(smem + L::kTableAt)[tid] = make_int4(off[0], off[1], off[2], off[3]);
  }
  if (tid == 0) {
    for (int s = 0; s < kSlots; ++s) {
      const bool raw_slot = kSplit && s == 0;
      cu::barrier_init(&full[s], raw_slot || !kSplit ? 1 : kConverters);  // landed, or split
      cu::barrier_init(&empty[s], raw_slot ? kConverters : kReleases);
    }
    for (int s = 0; s < 2; ++s) {
      cu::barrier_init(&b_full[s], 1);
      cu::barrier_init(&b_empty[s], kConsumerGroups);
    }
    cu::barrier_init_fence();
  }
  cu::fence_async_proxy();
  __syncthreads();

  if (group == kConsumerGroups) {
    const int ptid = tid - kConsumerGroups * 128;
    int stage = 0;
    if (ptid == 0) {  // one thread issues every copy: into the ring (free) or the raw slot
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        for (int c = 0; c < 3; ++c, ++stage) {
          const int slot = kSplit ? 0 : stage % kSlots;
          const int use = kSplit ? stage : stage / kSlots;
          cu::barrier_wait(&empty[slot], (use & 1) ^ 1);
          cu::barrier_arrive_expect_bytes(&full[slot], kWindowBytes);
          cu::bulk_copy(cu::smem_address(slot_at(slot)), in + (int64_t(tile) * 3 + c) * skeleton::stage_stride(4),
                        kWindowBytes, &full[slot]);
          if constexpr (kStreamB) {
            cu::barrier_wait(&b_empty[stage % 2], ((stage / 2) & 1) ^ 1);
            cu::barrier_arrive_expect_bytes(&b_full[stage % 2], kStageBBytes);
            cu::bulk_copy(cu::smem_address(smem + (stage % 2) * kStageBBytes), b_global + c * kStageBBytes,
                          kStageBBytes, &b_full[stage % 2]);
          }
        }
      }
      return;
    }
    if (!kSplit || ptid < 32) return;
    const int ctid = ptid - 32;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      for (int c = 0; c < 3; ++c, ++stage) {
        const int slot = 1 + stage % kPlaneSlots;
        cu::barrier_wait(&full[0], stage & 1);                             // the raw window landed
        cu::barrier_wait(&empty[slot], ((stage / kPlaneSlots) & 1) ^ 1);  // the planes' last reader is done
        uint8_t* planes = slot_at(slot);
        split_window(reinterpret_cast<const uint4*>(slot_at(0)), reinterpret_cast<uint4*>(planes),
                     reinterpret_cast<uint4*>(planes + kPlaneBytes), ctid);
        // The planes go to the tensor cores (async proxy); the raw slot to the next copy.
        cu::fence_async_proxy();
        cu::barrier_arrive(&empty[0]);
        cu::barrier_arrive(&full[slot]);
      }
    }
    return;
  }

  const int gtid = tid % 128, warp = gtid / 32, lane = gtid % 32;
  const uint32_t b_all = cu::smem_address(smem);
  // ldmatrix.x4 row addresses: lanes 8i..8i+7 give matrix i's rows -- pixel rows 0-7 / 8-15
  // of the warp's 16 (i = 0, 1; then 2, 3) at K units 0 and 1 (8 taps each, the second the
  // next 16 bytes, as adjacent cells of one row pair lie). Every matrix reads 128
  // contiguous bytes: no bank conflict.
  const uint32_t ld_row = ((warp * 16 + lane % 8 + (lane / 8) % 2 * 8) + lane / 16) * 16;
  float acc[12][4];
  // RS: A in registers, two sets by the parity of the tile's K step (9 per stage: odd, so
  // stages alternate too). Step k loads into the set of step k - 2, which the wait of step
  // k - 1 has seen finish.
  uint32_t hi[2][4], lo[2][4];
  // The gather's pixel rows g and g + 8 (consecutive pixels of 55-wide output rows, two
  // output rows apart at most), and which of its cols are padding in steps 6 and 7.
  int rows[2];
  uint32_t padding = 0;
  if constexpr (kForm == Form::kGather) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = group * 64 + warp * 16 + h * 8 + lane / 4;
      rows[h] = p / 55 % 2 * 4 * kWindowPitch + p % 55 * 4;
    }
    for (int step = kFirstPaddedStep; step < kGatherSteps / 3; ++step)
      for (int j = 0; j < 4; ++j)
        if (gather_tap(step, cu::mma::col_k16(lane % 4, j)) >= cu::mma::kTapsPerChannel)
          padding |= 1u << ((step - kFirstPaddedStep) * 4 + j);
  }
  const int4* koff = reinterpret_cast<const int4*>(smem + L::kTableAt) + lane % 4;
  int stage = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
#pragma unroll
    for (int i = 0; i < 12; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    int in_flight = -1;  // the previous stage's slot, released once its MMAs are done (SS, free)
    int b_in_flight = -1;  // the previous stage's B slot (streamed), likewise (every form)
    // A streamed B slot is free once the MMAs that read it are: after the wait that follows them.
    const auto release_b = [&] {
      if (kStreamB && b_in_flight >= 0 && gtid == 0) cu::barrier_arrive(&b_empty[b_in_flight]);
      b_in_flight = -1;
    };
#pragma unroll
    for (int c = 0; c < 3; ++c, ++stage) {
      const int slot = kSplit ? 1 + stage % kPlaneSlots : stage % kSlots;
      cu::barrier_wait(&full[slot], ((kSplit ? stage / kPlaneSlots : stage / kSlots) & 1));
      if constexpr (kStreamB) cu::barrier_wait(&b_full[stage % 2], (stage / 2) & 1);
      __syncwarp();  // the warpgroup-collective MMAs need the whole warp back together
      const uint32_t a_addr = cu::smem_address(slot_at(slot)) + group * kABlockBytes;
      const uint32_t b_addr = kStreamB ? b_all + (stage % 2) * kStageBBytes
                                       : b_all + c * steps_in_stage(kSteps, 0) * 2 * wg::kBlockBytes;
      // Descriptors from lane 0's starts, so that ptxas keeps them in uniform registers.
      const uint32_t starts = wg::uniform_starts(a_addr, b_addr);
      const auto b = wg::blocks_from_start(starts >> 16);
      if constexpr (!kRegistersA) {
        const auto a = wg::Operand::from_start(starts & 0xffffu, wg::kLeadingBytes, wg::kStrideBytes);
        wg::fence();
#pragma unroll
        for (int s = 0; s < steps_in_stage(kSteps, c); ++s) {
          // Warpgroup g's steps alternate between 2 KB blocks g and g + 1 of each plane.
          const uint32_t a_hi = (s % 2) * kABlockBytes / 16, a_lo = a_hi + kPlaneBytes / 16;
          const uint32_t b_hi = 2 * s * wg::kBlockUnits, b_lo = b_hi + wg::kBlockUnits;
          if constexpr (kMmas == 0) {
          } else if constexpr (kMmas == 3) {
            wg::bf16_m64n96k16_ss(acc, a.at(a_lo), b.at(b_hi));  // small terms first
            wg::bf16_m64n96k16_ss(acc, a.at(a_hi), b.at(b_lo));
            wg::bf16_m64n96k16_ss(acc, a.at(a_hi), b.at(b_hi));
          } else {  // the second plane and block as e4m3 corrections, 32 K values per row pair
            e4m3_m64n96k32_ss(acc, a.at(a_lo), b.at(b_lo));
            wg::f16_m64n96k16_ss(acc, a.at(a_hi), b.at(b_hi));
          }
        }
        wg::commit();  // one group per stage, as the space-to-depth kernel does
        if (in_flight >= 0) {
          wg::wait<1>();  // the previous stage's MMAs are done with its slot
          if (gtid == 0) cu::barrier_arrive(&empty[in_flight]);
          release_b();
        }
        in_flight = slot;
      } else {
        // The gather loads a step's words one step ahead, as the shipped kernel does.
        const uint32_t* window = reinterpret_cast<const uint32_t*>(slot_at(slot));
        uint32_t cur[2][4], nxt[2][4];
        if constexpr (kForm == Form::kGather) gather_words(cur, window, rows, koff[0], 0);
#pragma unroll
        for (int s = 0; s < steps_in_stage(kSteps, c); ++s) {
          const int set = (c * steps_in_stage(kSteps, 0) + s) % 2;
          if constexpr (kForm == Form::kGather) {
            if (s + 1 < steps_in_stage(kSteps, c)) gather_words(nxt, window, rows, koff[(s + 1) * 4], s + 1);
            if (s >= kFirstPaddedStep) {  // zero A at padding taps (an Inf input would give NaN)
#pragma unroll
              for (int j = 0; j < 4; ++j)
                if ((padding >> ((s - kFirstPaddedStep) * 4 + j)) & 1) cur[0][j] = cur[1][j] = 0;
            }
            cu::mma::Bf16x3::A a;
            cu::mma::Bf16x3::make_a(a, cur);
#pragma unroll
            for (int r = 0; r < 4; ++r) hi[set][r] = a.hi[r], lo[set][r] = a.lo[r];
          } else {
            // Step s: row pair s / 3, cells s % 3 (within the plane's first 5 KB).
            const uint32_t at = a_addr + ld_row + (s / 3) * 1024 + (s % 3) * 16;
            ldmatrix_x4(hi[set], at);
            ldmatrix_x4(lo[set], at + kPlaneBytes);
          }
          wg::fence();
          const uint32_t b_hi = 2 * s * wg::kBlockUnits, b_lo = b_hi + wg::kBlockUnits;
          wg::bf16_m64n96k16(acc, lo[set], b.at(b_hi));
          wg::bf16_m64n96k16(acc, hi[set], b.at(b_lo));
          wg::bf16_m64n96k16(acc, hi[set], b.at(b_hi));
          wg::commit();
          wg::wait<1>();
          if (s == 0) release_b();  // the previous stage's last MMAs are done
          if constexpr (kForm == Form::kGather) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int j = 0; j < 4; ++j) cur[h][j] = nxt[h][j];
          }
        }
        cu::barrier_arrive(&empty[slot]);  // this thread's loads from the slot are done
      }
      b_in_flight = stage % 2;
    }
    wg::wait<0>();
    wg::fence_accumulators(acc);
    if (!kRegistersA && gtid == 0) cu::barrier_arrive(&empty[in_flight]);
    release_b();
    if constexpr (kStore) skeleton::store_float32(acc, out, tile, group, gtid);
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 12; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) sum += acc[i][j];
  if (sum == 12345.f) out[tid] = sum;  // keeps the MMAs alive in every variant
}

template <Form kForm, int kSteps, bool kStore, int kMmas = 3, bool kStreamB = false>
int measure(int sms, const uint8_t* in, float* out, const uint8_t* b_global, uint8_t* flush, size_t flush_bytes,
            float (&free_ms)[8]) {
  // FLOOR_ONLY=<text> runs only the forms whose name contains it; FLOOR_REPS and
  // FLOOR_TILES shrink a run for compute-sanitizer (e.g. 2 launches of 264 tiles).
  const char* only = std::getenv("FLOOR_ONLY");
  if (only != nullptr && std::strstr(form_name(kForm), only) == nullptr) return 0;
  const int reps = std::getenv("FLOOR_REPS") ? std::atoi(std::getenv("FLOOR_REPS")) : 50;
  const int tiles = std::getenv("FLOOR_TILES") ? std::atoi(std::getenv("FLOOR_TILES")) : kTiles;
  auto kernel = operands_kernel<kForm, kSteps, kStore, kMmas, kStreamB>;
  constexpr int kSmem = Layout<kStreamB, kSteps>::kLaunchSmemBytes;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  skeleton::Timing t;
  if (skeleton::time_launches([&] { kernel<<<sms, kThreads, kSmem>>>(in, out, b_global, tiles); }, flush, flush_bytes,
                              reps, t) != 0)
    return 1;
  // The free form with the same K, MMAs and B is the reference for the other forms' cost.
  float& reference = free_ms[(kSteps == kGatherSteps ? 3 : kStreamB ? 2 : kMmas != 3) * 2 + kStore];
  if (kForm == Form::kFree && (kSteps == kMaxSteps || kSteps == kGatherSteps)) reference = t.cold_ms;
  // Tensor work in k16 bf16 units: three per step, or an fp16 k16 and an e4m3 k32 (two).
  const double flops = kMmas == 0 ? 0.0 : 2.0 * skeleton::kPixels * 96 * (kSteps * 16) * 3;
  char formation[32] = "";
  if (kForm != Form::kFree && kMmas != 0) std::snprintf(formation, sizeof formation, "%+.4f", t.cold_ms - reference);
  std::printf("| %-40s | %-15s | %-8s | %d | %-28s | %.4f | %.4f | %.0f | %.2fx | %s |\n", form_name(kForm),
              mmas_name(kMmas), kStreamB ? "streamed" : "resident", kSteps * 16, kStore ? "today's float32 NCHW stores" : "none", t.warm_ms, t.cold_ms,
              flops / (t.cold_ms * 1e-3) / 1e12, t.cold_ms / kTargetMs, formation);
  return 0;
}

int main() {
  int sms = 0;
  cudaDeviceProp prop;
  if (hopper_device(sms, prop) != 0) return 1;
  uint8_t *in = nullptr, *b_global = nullptr, *flush = nullptr;
  float* out = nullptr;
  const size_t flush_bytes = size_t(256) << 20;
  CHECK(cudaMalloc(&in, skeleton::input_bytes(4)));
  CHECK(cudaMalloc(&out, skeleton::kFloat32OutputBytes));
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&b_global, 3 * kStageBBytes));  // B packed for streaming: a channel per stage
  // Pairs of fp16 values in [-1, 1) read as float32: finite, normal, nonzero.
  fill<<<4 * sms, 256>>>(reinterpret_cast<__half*>(in), skeleton::input_bytes(4) / 2);
  CHECK(cudaGetLastError());
  fill<<<sms, 256>>>(reinterpret_cast<__half*>(b_global), 3 * kStageBBytes / 2);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::printf("%s, %d SMs; fp32 (bf16x3) at 224x224, batch 256: %d tiles of %d pixels, a %d-byte float32 window "
              "per (tile, channel), B %d bytes (resident, or a channel's %d per stage); target %.2f ms\n\n",
              prop.name, sms, kTiles, skeleton::kTilePixels, kWindowBytes, 3 * kStageBBytes, kStageBBytes,
              kTargetMs);
  std::printf("| A operand | MMAs per step | B | K | output | ms, back to back | ms, cold L2 | tensor TFLOP/s (cold) "
              "| of target | formation (cold, vs free at that K and B) |\n|---|---|---|---|---|---|---|---|---|---|\n");
  float free_ms[8] = {};  // the free form's times: [432, 432 two MMAs, 432 streamed B, 384][output]
  int rc = 0;
  rc |= measure<Form::kFree, 23, false>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 23, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 27, false>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 27, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kSs, 27, false>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kSs, 27, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kRs, 27, false>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kRs, 27, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 27, false, 2>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 27, true, 2>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kSs, 27, false, 2>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kSs, 27, true, 2>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kSs, 27, false, 0>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, kGatherSteps, false>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, kGatherSteps, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kGather, kGatherSteps, false>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kGather, kGatherSteps, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 27, false, 3, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kFree, 27, true, 3, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kRs, 27, false, 3, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  rc |= measure<Form::kRs, 27, true, 3, true>(sms, in, out, b_global, flush, flush_bytes, free_ms);
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  CHECK(cudaFree(flush));
  CHECK(cudaFree(b_global));
  return rc;
}
