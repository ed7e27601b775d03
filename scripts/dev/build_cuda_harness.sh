#!/usr/bin/env bash
# Usage: [NVCC=...] [ARCHS="80 86 89 90"] [OUT_DIR=...] bash scripts/dev/build_cuda_harness.sh
# Builds the standalone CUDA harness (tests/cuda_harness): the kernel objects compiled as
# CMakeLists.txt compiles them for the library, linked with a torch-free driver program and
# the static CUDA runtime, so the binary runs on any machine whose driver takes its CUDA version.
#
#   bash scripts/dev/build_cuda_harness.sh                     # CUDA 11.8 (Debian), sm_80/86/89/90
#   NVCC=/usr/local/bin/nvcc ARCHS="80 86 89 90a" bash scripts/dev/build_cuda_harness.sh   # CUDA 12+
#
# NVCC   the compiler (default: Debian's CUDA 11.8, /usr/lib/nvidia-cuda-toolkit/bin/nvcc)
# ARCHS  SASS targets, e.g. "80 86 89 90" or "80 86 89 90a" (sm_90a needs CUDA 12+). No PTX is
#        embedded: the device must run the SASS this nvcc produced, not a driver JIT of it.
# CCBIN  host compiler (default: g++-11 for nvcc < 12, which rejects newer GCCs; else nvcc's own)
# JOBS   parallel nvcc jobs (default: from cores and free memory); FORCE=1 rebuilds the kernels.
# Output: build/cuda-harness-<nvcc release>/alexconv_cuda_harness (OUT_DIR overrides the folder);
# objects and build logs (ptxas spill warnings) in its obj/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
NVCC=${NVCC:-/usr/lib/nvidia-cuda-toolkit/bin/nvcc}
[[ -x $NVCC ]] || { echo "nvcc not found at $NVCC" >&2; exit 1; }
release=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
major=${release%%.*}
[[ -n $release ]] || { echo "cannot read the release of $NVCC" >&2; exit 1; }
# Debian's nvcc 11.8 runs the ptxas PATH finds first (a newer toolkit's /usr/local/bin/ptxas
# would assemble 11.8's PTX): its own directory and /usr/bin go first, and the ptxas found must
# be the nvcc's release.
if [[ $major -lt 12 ]]; then export PATH="$(dirname "$NVCC"):/usr/bin:$PATH"; fi
ptxas_release=$( (command -v ptxas >/dev/null && ptxas --version) | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
if [[ $major -lt 12 && $ptxas_release != "$release" ]]; then
  echo "ptxas on PATH is release ${ptxas_release:-none}, not nvcc's $release: $(command -v ptxas || true)" >&2; exit 1
fi
ARCHS=${ARCHS:-80 86 89 90}
if [[ -z ${CCBIN+x} ]]; then CCBIN=$([[ $major -lt 12 ]] && echo g++-11 || echo ""); fi
ccbin=(); [[ -n $CCBIN ]] && ccbin=(-ccbin "$CCBIN")
out=${OUT_DIR:-build/cuda-harness-$release}
# Objects and logs in obj/, the binary alone above them: the device call carries just the binary
# (36 MB; the folder with igemm.o is past the device tool's 64 MiB carry limit).
obj_dir=$out/obj
mkdir -p "$obj_dir"

# CMakeLists.txt: Release (-O3 -DNDEBUG), torch's CUDA flags (--expt-relaxed-constexpr
# --expt-extended-lambda), the target's -lineinfo -Xptxas=-warn-spills, C++17, and
# ALEXCONV_BUILT_FOR_SM90A on every kernel file when 9.0a is among the targets.
gencode=()
defines=()
for a in $ARCHS; do
  if [[ $a == *a && $major -lt 12 ]]; then
    echo "CUDA $release has no sm_$a (CMakeLists.txt builds 9.0 instead under nvcc < 12)" >&2; exit 1
  fi
  gencode+=(-gencode "arch=compute_$a,code=sm_$a")
  [[ $a == 90a ]] && defines=(-DALEXCONV_BUILT_FOR_SM90A)
done
kflags=(-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr --expt-extended-lambda -lineinfo
        -Xptxas=-warn-spills "${ccbin[@]}" "${gencode[@]}" "${defines[@]}")
# Host code of the harness: warnings on, so that nvcc hands -Wall -Wextra to the host compiler.
# ALEXCONV_HARNESS_ARCHS: the targets, printed by the binary. The kernels' define too: the
# harness reads wgmma_available() only through the kernel objects, but keeps the same view.
hflags=(-std=c++17 -O2 "${ccbin[@]}" "${gencode[@]}" "${defines[@]}" -Xcompiler=-Wall,-Wextra -I op
        "-DALEXCONV_HARNESS_ARCHS=\"$ARCHS\"")

# Parallel jobs: nvcc compiling igemm.cu peaked at 0.65 GB per process (measured); keep 1 GB per
# job so that small machines stay out of swap. Measured on the 2-core CPU machine (from scratch):
# CUDA 11.8, 4 targets: kernels 99-100 s with 1 or 2 jobs (igemm.cu alone 85 s; nvcc's --threads
# gave it no speed-up there, user time = wall time); CUDA 13.0 with 90a: kernels 143 s.
if [[ -z ${JOBS:-} ]]; then
  avail_gb=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  JOBS=$(( $(nproc) < avail_gb ? $(nproc) : avail_gb ))
  (( JOBS >= 1 )) || JOBS=1
fi
echo "== harness build: $("$NVCC" --version | tail -n 1); archs: $ARCHS; ${CCBIN:-default host compiler}; $JOBS jobs -> $out"

# Kernel objects are rebuilt when any source under op/ or the flags changed (they take minutes).
stamp="$obj_dir/kernel-flags.txt"
flags_now="$NVCC ${kflags[*]}"
rebuild=${FORCE:-0}
[[ -f $stamp && $(cat "$stamp") == "$flags_now" ]] || rebuild=1
kernels=(op/cuda/direct/direct.cu op/cuda/common/tma_map.cu op/cuda/igemm/igemm.cu op/cuda/s2d/s2d.cu op/cuda/s2d_mma_sync/s2d_mma_sync.cu)
objs=()
for src in "${kernels[@]}"; do
  obj="$obj_dir/$(basename "$src" .cu).o"
  objs+=("$obj")
  [[ -f $obj && -z $(find op -newer "$obj" -print -quit) ]] || rebuild=1
done
SECONDS=0
if [[ $rebuild == 1 ]]; then
  rm -f "$stamp"
  # igemm.cu dominates: it gets nvcc's per-target threads; the small files run beside it.
  pids=()
  for src in "${kernels[@]}"; do
    name=$(basename "$src" .cu)
    threads=1; [[ $name == igemm ]] && threads=$JOBS
    "$NVCC" "${kflags[@]}" --threads "$threads" -c "$src" -o "$obj_dir/$name.o" > "$obj_dir/$name.log" 2>&1 &
    pids+=("$!:$name")
    # One job: one file at a time.
    if [[ $JOBS -le 1 ]]; then wait "$!" || { echo "FAIL $name:"; tail -n 30 "$obj_dir/$name.log"; exit 1; }; pids=(); fi
  done
  failed=0
  for entry in "${pids[@]}"; do
    wait "${entry%%:*}" || { echo "FAIL ${entry#*:}:"; tail -n 30 "$obj_dir/${entry#*:}.log"; failed=1; }
  done
  [[ $failed == 0 ]] || exit 1
  echo "$flags_now" > "$stamp"
  echo "kernels compiled in ${SECONDS} s"
  grep -hE "spill|warning" "$obj_dir"/{direct,tma_map,igemm,s2d}.log | sort | uniq -c | head -20 || true
else
  echo "kernels up to date"
fi
t0=$SECONDS
: > "$obj_dir/harness.log"
for name in harness self_test; do
  "$NVCC" "${hflags[@]}" -c "tests/cuda_harness/$name.cu" -o "$obj_dir/$name.o" 2>&1 | tee -a "$obj_dir/harness.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || exit 1
done
# Static CUDA runtime (the binary needs only the driver) and static libstdc++/libgcc (the
# device host's own may differ from this machine's GCC).
"$NVCC" "${ccbin[@]}" "${gencode[@]}" -cudart static "$obj_dir/harness.o" "$obj_dir/self_test.o" "${objs[@]}" \
  -Xcompiler=-static-libstdc++,-static-libgcc -o "$out/alexconv_cuda_harness"
echo "harness compiled and linked in $((SECONDS - t0)) s: $out/alexconv_cuda_harness"
if grep -q warning "$obj_dir/harness.log"; then
  echo "host-code warnings (above): fix them" >&2; exit 1
fi
