// The tensor-core implicit GEMM: out[pixel][channel] = sum_k A[pixel][k] * B[k][channel],
// M = output pixels, N = 96, K = 3 x 121 (each channel padded to 128).
//
// A persistent grid of 256-thread CTAs walks the tiles of conv1_tiling.h. Per
// CTA, the packed weights of all three channels (B) stay in shared memory for the
// whole run; per tile, each input channel's window is staged once in one of two
// slots, the next channel's window travelling through registers while the
// current one is multiplied. Each warp owns 32 pixels x 96 channels; A fragments
// are gathered straight from the window (the im2col exists only in registers),
// and results leave as fp32 accumulators + bias, straight to global memory.
#include "conv1_launch.h"

#include <algorithm>
#include <type_traits>

#include "../conv1_geometry.h"
#include "conv1_dtype.cuh"
#include "conv1_mma.cuh"
#include "conv1_tiling.h"

namespace alexconv {
namespace cuda {
namespace {

constexpr int kSteps = 8;                    // 128 padded taps per channel / 16
constexpr int kTapsPerChannel = kKernel * kKernel;
constexpr int kLoadsPerThread = kSlotElems / kTileThreads;
constexpr int kWarpPixels = 32;              // two m16 tiles per warp

template <class Mode>
struct SmemLayout {
  using Word = typename Mode::Word;
  static constexpr size_t kB = size_t(kInChannels) * kSteps * Mode::kChunks * 32 * sizeof(uint4);
  static constexpr size_t kKoff = kSteps * 4 * sizeof(int4);
  static constexpr size_t kBias = kOutChannels * sizeof(float);
  static constexpr size_t kSlots = 2 * size_t(kSlotElems) * sizeof(Word);
  static constexpr size_t kTotal = kB + kKoff + kBias + kSlots;
  static_assert((kB + kKoff + kBias) % 16 == 0, "slots must stay 16-byte aligned");
  // The raw weights of one channel are staged in the slots while B is packed.
  static_assert(kOutChannels * kTapsPerChannel * sizeof(typename Mode::Raw) <= kSlots,
                "weight staging fits");
};

// Per-thread view of the tile being multiplied: for its 2 m-tiles x 2 rows
// (pixels g and g+8), the offset into the window and into the output (-1: no pixel).
struct PixelRows {
  int window[2][2];
  int64_t out[2][2];
};

__device__ PixelRows pixel_rows(const Tile& tile, const TilePlan& plan, const Problem& p,
                                int warp, int g) {
  PixelRows r;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int local = warp * kWarpPixels + mt * 16 + h * 8 + g;
      const int64_t q = tile.q_begin + local;
      r.window[mt][h] = 0;
      r.out[mt][h] = -1;
      if (local < plan.tile_pixels && q < tile.q_end) {
        const int64_t oy = q / tile.width, x = q % tile.width;
        r.window[mt][h] = int((oy - tile.oy0) * kStride * plan.pitch + x * kStride);
        r.out[mt][h] = tile.n * p.out_stride[0] + oy * p.out_stride[2] +
                       (tile.x0 + x) * p.out_stride[3];
      }
    }
  }
  return r;
}

// Window staging: warp w takes (row, 32-column chunk) pairs w, w + 8, w + 16, ...
// of the tile's window, one element per lane. The walk is warp-uniform, so the
// bounds checks that produce the zero padding cost little, and loads along a
// contiguous W coalesce. kLoadsPerThread pairs per warp cover a full slot
// because the plan keeps rows * pitch <= kSlotElems with pitch a multiple of 32.
struct WindowWalk {
  int pairs, row, chunk, drow, dchunk, chunks;
  __device__ WindowWalk(const Tile& tile, int warp) {
    chunks = int((tile.cols + 31) / 32);
    pairs = int(tile.rows) * chunks;
    row = warp / chunks;
    chunk = warp % chunks;
    drow = (kTileThreads / 32) / chunks;
    dchunk = (kTileThreads / 32) % chunks;
  }
  __device__ void next() {
    row += drow;
    chunk += dchunk;
    if (chunk >= chunks) {
      chunk -= chunks;
      ++row;
    }
  }
};

template <class Mode>
__device__ void load_window(typename Mode::Raw (&regs)[kLoadsPerThread], const Problem& p,
                            const Tile& tile, int channel, int warp, int lane) {
  using Raw = typename Mode::Raw;
  const Raw* base = static_cast<const Raw*>(p.input) + tile.n * p.in_stride[0] +
                    channel * p.in_stride[1];
  const int64_t iy0 = tile.oy0 * kStride - kPad, ix0 = tile.x0 * kStride - kPad;
  WindowWalk w(tile, warp);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (warp + 8 * i < w.pairs) {
      const int64_t iy = iy0 + w.row;
      const int col = w.chunk * 32 + lane;
      const int64_t ix = ix0 + col;
      const bool inside = iy >= 0 && iy < p.in_h && col < tile.cols && ix >= 0 && ix < p.in_w;
      regs[i] = inside ? __ldg(base + iy * p.in_stride[2] + ix * p.in_stride[3]) : Raw(0);
    }
    w.next();
  }
}

template <class Mode>
__device__ void store_window(typename Mode::Word* slot,
                             const typename Mode::Raw (&regs)[kLoadsPerThread],
                             const Tile& tile, int pitch, int warp, int lane) {
  WindowWalk w(tile, warp);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (warp + 8 * i < w.pairs) {
      slot[w.row * pitch + w.chunk * 32 + lane] = Mode::to_word(regs[i]);
    }
    w.next();
  }
}

// Packs B (all channels, fragment order), the tap-offset table and the bias.
template <class Mode, DType T>
__device__ void prepare_constants(const Problem& p, int pitch, uint4* b_frag, int4* koff,
                                  float* bias, typename Mode::Raw* staging, int tid) {
  using Raw = typename Mode::Raw;
  const Raw* weight = static_cast<const Raw*>(p.weight);
  for (int c = 0; c < kInChannels; ++c) {
    // Coalesced-ish strided reads of one channel's [96][121] taps, then packing from shared memory.
    for (int e = tid; e < kOutChannels * kTapsPerChannel; e += kTileThreads) {
      const int n = e / kTapsPerChannel, tap = e % kTapsPerChannel;
      staging[e] = weight[n * p.weight_stride[0] + c * p.weight_stride[1] +
                          (tap / kKernel) * p.weight_stride[2] +
                          (tap % kKernel) * p.weight_stride[3]];
    }
    __syncthreads();
    constexpr int kPerStep = Mode::kChunks * 32;
    for (int e = tid; e < kSteps * kPerStep; e += kTileThreads) {
      const int step = e / kPerStep, chunk = (e / 32) % Mode::kChunks, lane = e % 32;
      const auto w = [&](int n, int col) {
        const int tap = step * 16 + col;
        return tap < kTapsPerChannel ? staging[n * kTapsPerChannel + tap] : Raw(0);
      };
      b_frag[(c * kSteps + step) * kPerStep + chunk * 32 + lane] =
          Mode::pack_b(w, chunk, lane >> 2, lane & 3);
    }
    __syncthreads();
  }
  if (tid < kSteps * 4) {
    const int step = tid >> 2, t = tid & 3;
    int off[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tap = step * 16 + Mode::col(t, j);
      off[j] = tap < kTapsPerChannel ? (tap / kKernel) * pitch + tap % kKernel : 0;
    }
    koff[tid] = make_int4(off[0], off[1], off[2], off[3]);
  }
  if (tid < kOutChannels) {
    const Raw* b = static_cast<const Raw*>(p.bias);
    bias[tid] = b ? to_float<T>(b[tid * p.bias_stride]) : 0.f;
  }
  __syncthreads();
}

// The thread's A words of one step: pixel rows (g, g+8) of both m-tiles x 4 tap columns.
template <class Mode>
struct StepWords {
  typename Mode::Word x[2][2][4];
};

template <class Mode>
__device__ __forceinline__ void load_step(StepWords<Mode>& s, const typename Mode::Word* window,
                                          const PixelRows& rows, int4 k4) {
  const int ko[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 4; ++j) s.x[mt][h][j] = window[rows.window[mt][h] + ko[j]];
}

// acc += A(window) * B(channel) over the channel's 8 steps. The next step's A
// words and the step after's tap offsets are loaded before this step's MMAs, so
// shared-memory latency overlaps tensor-core work.
template <class Mode>
__device__ __forceinline__ void multiply_channel(float (&acc)[2][mma::kNTiles][4],
                                                 const typename Mode::Word* window,
                                                 const uint4* b_channel, const int4* koff,
                                                 const PixelRows& rows, int lane) {
  using Word = typename Mode::Word;
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t]);
  int4 k_next = koff[4 + t];
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    typename Mode::A a[2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      if (step == kSteps - 1) {
        // Taps 121..127 are padding: zero A there (B is zero too, but A may be inf).
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if ((kSteps - 1) * 16 + Mode::col(t, j) >= kTapsPerChannel) {
            cur.x[mt][0][j] = Word(0);
            cur.x[mt][1][j] = Word(0);
          }
        }
      }
      Mode::make_a(a[mt], cur.x[mt]);
    }
    const uint4* b_step = b_channel + step * Mode::kChunks * 32 + lane;
#pragma unroll
    for (int chunk = 0; chunk < Mode::kChunks; ++chunk) {
      const uint4 b = b_step[chunk * 32];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) Mode::mma(acc[mt], chunk, a[mt], b);
    }
    if (step + 1 < kSteps) cur = nxt;
  }
}

template <DType T>
__device__ void store_tile(float (&acc)[2][mma::kNTiles][4], const PixelRows& rows,
                           const float* bias, const Problem& p, int t) {
  using S = typename Storage<T>::type;
  S* out = static_cast<S*>(p.output);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t base = rows.out[mt][h];
      if (base < 0) continue;
#pragma unroll
      for (int nt = 0; nt < mma::kNTiles; ++nt) {
        const int ch = nt * 8 + 2 * t;
        out[base + ch * p.out_stride[1]] = from_float<T>(acc[mt][nt][2 * h] + bias[ch]);
        out[base + (ch + 1) * p.out_stride[1]] =
            from_float<T>(acc[mt][nt][2 * h + 1] + bias[ch + 1]);
      }
    }
  }
}

template <class Mode, DType T>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_igemm_kernel(const Problem p, const TilePlan plan) {
  using Word = typename Mode::Word;
  using Layout = SmemLayout<Mode>;
  static_assert(std::is_same_v<typename Mode::Raw, typename Storage<T>::type>, "mode matches dtype");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_frag = reinterpret_cast<uint4*>(smem);
  int4* koff = reinterpret_cast<int4*>(smem + Layout::kB);
  float* bias = reinterpret_cast<float*>(smem + Layout::kB + Layout::kKoff);
  Word* slots = reinterpret_cast<Word*>(smem + Layout::kB + Layout::kKoff + Layout::kBias);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int pitch = int(plan.pitch);
  prepare_constants<Mode, T>(p, pitch, b_frag, koff, bias,
                             reinterpret_cast<typename Mode::Raw*>(slots), tid);

  // Pipeline over stages (tile, channel): multiply stage s from slot s % 2 while
  // stage s + 1 waits in registers.
  int64_t tile_index = blockIdx.x;
  Tile tile = decode_tile(plan, tile_index);
  PixelRows rows = pixel_rows(tile, plan, p, warp, lane >> 2);
  int channel = 0;

  int64_t next_index = tile_index;  // the stage held in registers
  Tile next = tile;
  int next_channel = 1;
  typename Mode::Raw regs[kLoadsPerThread];
  load_window<Mode>(regs, p, tile, 0, warp, lane);
  store_window<Mode>(slots, regs, tile, pitch, warp, lane);
  load_window<Mode>(regs, p, next, next_channel, warp, lane);
  __syncthreads();

  float acc[2][mma::kNTiles][4] = {};
  for (int64_t stage = 0;; ++stage) {
    multiply_channel<Mode>(acc, slots + (stage & 1) * kSlotElems,
                           b_frag + channel * kSteps * Mode::kChunks * 32, koff, rows, lane);
    if (channel == kInChannels - 1) {
      store_tile<T>(acc, rows, bias, p, lane & 3);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < mma::kNTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
    }
    const bool have_next = next_index < plan.tiles;
    if (have_next) {
      store_window<Mode>(slots + ((stage + 1) & 1) * kSlotElems, regs, next, pitch, warp, lane);
      if (++next_channel == kInChannels) {
        next_channel = 0;
        next_index += gridDim.x;
        if (next_index < plan.tiles) next = decode_tile(plan, next_index);
      }
      if (next_index < plan.tiles) load_window<Mode>(regs, p, next, next_channel, warp, lane);
    }
    __syncthreads();
    if (!have_next) break;
    if (++channel == kInChannels) {
      channel = 0;
      tile_index += gridDim.x;
      tile = decode_tile(plan, tile_index);
      rows = pixel_rows(tile, plan, p, warp, lane >> 2);
    }
  }
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  const TilePlan plan = make_tile_plan(p.batch, p.out_h, p.out_w);
  if (plan.tiles == 0) return cudaSuccess;
  const auto kernel = conv1_igemm_kernel<Mode, T>;
  const size_t smem = SmemLayout<Mode>::kTotal;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  int per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTileThreads, smem);
  if (err != cudaSuccess) return err;
  const int64_t grid = std::min<int64_t>(plan.tiles, int64_t(std::max(per_sm, 1)) * device.sm_count);
  kernel<<<unsigned(grid), kTileThreads, smem, stream>>>(p, plan);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

size_t igemm_smem_bytes(const Problem& p) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? SmemLayout<mma::Tf32>::kTotal : SmemLayout<mma::Bf16x3>::kTotal;
    case DType::kFloat16: return SmemLayout<mma::Half<false>>::kTotal;
    case DType::kBFloat16: return SmemLayout<mma::Half<true>>::kTotal;
  }
  return ~size_t(0);
}

}  // namespace

bool igemm_supported(const Problem& p, const DeviceInfo& device) {
  return device.major >= 8 && igemm_smem_bytes(p) <= device.max_smem_per_block_optin;
}

cudaError_t launch_conv1_igemm(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? launch_typed<mma::Tf32, DType::kFloat32>(p, device, stream)
                          : launch_typed<mma::Bf16x3, DType::kFloat32>(p, device, stream);
    case DType::kFloat16: return launch_typed<mma::Half<false>, DType::kFloat16>(p, device, stream);
    case DType::kBFloat16: return launch_typed<mma::Half<true>, DType::kBFloat16>(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
