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
  using Elem = typename Mode::Elem;
  static constexpr size_t kB = size_t(kInChannels) * kSteps * Mode::kChunks * 32 * sizeof(uint4);
  static constexpr size_t kKoff = kSteps * 4 * sizeof(int4);
  static constexpr size_t kBias = kOutChannels * sizeof(float);
  static constexpr size_t kSlots = 2 * size_t(kSlotElems) * sizeof(Elem);
  static constexpr size_t kTotal = kB + kKoff + kBias + kSlots;
  static_assert((kB + kKoff + kBias) % 16 == 0, "slots must stay 16-byte aligned");
  // The raw weights of one channel are staged in the slots while B is packed.
  static_assert(kOutChannels * kTapsPerChannel <= 2 * kSlotElems, "weight staging fits");
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

// Walks a window row-major in steps of kTileThreads elements without dividing.
struct WindowWalk {
  int row, col, drow, dcol, cols;
  __device__ WindowWalk(int cols_, int tid)
      : row(tid / cols_), col(tid % cols_), drow(kTileThreads / cols_),
        dcol(kTileThreads % cols_), cols(cols_) {}
  __device__ void next() {
    row += drow;
    col += dcol;
    if (col >= cols) {
      col -= cols;
      ++row;
    }
  }
};

template <DType T>
__device__ void load_window(typename Storage<T>::type (&regs)[kLoadsPerThread], const Problem& p,
                            const Tile& tile, int channel, int tid) {
  using S = typename Storage<T>::type;
  if (tile.rows == 0) return;
  const S* base = static_cast<const S*>(p.input) + tile.n * p.in_stride[0] +
                  channel * p.in_stride[1];
  const int64_t iy0 = tile.oy0 * kStride - kPad, ix0 = tile.x0 * kStride - kPad;
  const int elems = int(tile.rows * tile.cols);
  WindowWalk w(int(tile.cols), tid);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (i * kTileThreads + tid < elems) {
      const int64_t iy = iy0 + w.row, ix = ix0 + w.col;
      const bool inside = iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w;
      regs[i] = inside ? __ldg(base + iy * p.in_stride[2] + ix * p.in_stride[3]) : S(0);
    }
    w.next();
  }
}

template <DType T>
__device__ void store_window(typename Storage<T>::type* slot,
                             const typename Storage<T>::type (&regs)[kLoadsPerThread],
                             const Tile& tile, int pitch, int tid) {
  if (tile.rows == 0) return;
  const int elems = int(tile.rows * tile.cols);
  WindowWalk w(int(tile.cols), tid);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (i * kTileThreads + tid < elems) slot[w.row * pitch + w.col] = regs[i];
    w.next();
  }
}

// Packs B (all channels, fragment order), the tap-offset table and the bias.
template <class Mode, DType T>
__device__ void prepare_constants(const Problem& p, int pitch, uint4* b_frag, int4* koff,
                                  float* bias, typename Mode::Elem* staging, int tid) {
  using Elem = typename Mode::Elem;
  const Elem* weight = static_cast<const Elem*>(p.weight);
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
        return tap < kTapsPerChannel ? staging[n * kTapsPerChannel + tap] : Elem(0);
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
    const Elem* b = static_cast<const Elem*>(p.bias);
    bias[tid] = b ? to_float<T>(b[tid * p.bias_stride]) : 0.f;
  }
  __syncthreads();
}

// acc += A(window) * B(channel) over the channel's 8 steps.
template <class Mode>
__device__ __forceinline__ void multiply_channel(float (&acc)[2][mma::kNTiles][4],
                                                 const typename Mode::Elem* window,
                                                 const uint4* b_channel, const int4* koff,
                                                 const PixelRows& rows, int lane) {
  using Elem = typename Mode::Elem;
  const int t = lane & 3;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int4 k4 = koff[step * 4 + t];
    const int ko[4] = {k4.x, k4.y, k4.z, k4.w};
    typename Mode::A a[2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      Elem x[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          x[h][j] = window[rows.window[mt][h] + ko[j]];
          // Taps 121..127 are padding: zero A (B is zero there too, but A may be inf).
          if (step == kSteps - 1 && (kSteps - 1) * 16 + Mode::col(t, j) >= kTapsPerChannel) {
            x[h][j] = Elem(0);
          }
        }
      }
      Mode::make_a(a[mt], x);
    }
    const uint4* b_step = b_channel + step * Mode::kChunks * 32 + lane;
#pragma unroll
    for (int chunk = 0; chunk < Mode::kChunks; ++chunk) {
      const uint4 b = b_step[chunk * 32];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) Mode::mma(acc[mt], chunk, a[mt], b);
    }
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
  using Elem = typename Mode::Elem;
  using Layout = SmemLayout<Mode>;
  static_assert(sizeof(Elem) == sizeof(typename Storage<T>::type), "mode matches dtype");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_frag = reinterpret_cast<uint4*>(smem);
  int4* koff = reinterpret_cast<int4*>(smem + Layout::kB);
  float* bias = reinterpret_cast<float*>(smem + Layout::kB + Layout::kKoff);
  Elem* slots = reinterpret_cast<Elem*>(smem + Layout::kB + Layout::kKoff + Layout::kBias);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int pitch = int(plan.pitch);
  prepare_constants<Mode, T>(p, pitch, b_frag, koff, bias, slots, tid);

  // Pipeline over stages (tile, channel): multiply stage s from slot s % 2 while
  // stage s + 1 waits in registers.
  int64_t tile_index = blockIdx.x;
  Tile tile = decode_tile(plan, tile_index);
  PixelRows rows = pixel_rows(tile, plan, p, warp, lane >> 2);
  int channel = 0;

  int64_t next_index = tile_index;  // the stage held in registers
  Tile next = tile;
  int next_channel = 1;
  Elem regs[kLoadsPerThread];
  load_window<T>(regs, p, tile, 0, tid);
  store_window<T>(slots, regs, tile, pitch, tid);
  load_window<T>(regs, p, next, next_channel, tid);
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
      store_window<T>(slots + ((stage + 1) & 1) * kSlotElems, regs, next, pitch, tid);
      if (++next_channel == kInChannels) {
        next_channel = 0;
        next_index += gridDim.x;
        if (next_index < plan.tiles) next = decode_tile(plan, next_index);
      }
      if (next_index < plan.tiles) load_window<T>(regs, p, next, next_channel, tid);
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
