#!/usr/bin/env bash
# Usage: bash scripts/device/device_check.sh [STEP ...]   (steps below)
# The one-call GPU check: build with CUDA, run the whole test suite (GPU tests
# included), compute-sanitizer on small cases, and the benchmark; a short table last.
#
#   bash scripts/device/device_check.sh [build] [test] [forced] [emulate] [sanitize] [bench] [benchfull]
#                                [profile] [ceiling] [floor] [operands] [mma-ceiling] [harness] [deploy]
#                                [distributed]
#   (default: build test forced emulate sanitize bench; sanitize = sanitize-a + -b + -c;
#   SANITIZE_TOOLS narrows sanitize-c's tools; SANITIZE_RUNS="tool:kernel ..." replaces a step's list
#   (kernel: a forced kernel, as-CC for an emulated class, or KERNEL@as-CC for both).
#   On one 600 s device call fit: forced; emulate bench; each sanitize-x. build test no longer
#   does (H200, 2026-11-26: build 140 s, the suite past 460 s): split the suite with PYTEST_ARGS,
#   e.g. PYTEST_ARGS='tests/test_[a-f]*.py' for build test, then the rest in a second call.)
#   harness: the standalone kernel harness (tests/cuda_harness) as CUDA 11.8 built it on the CPU
#   machine (carry build/cuda-harness-11.8); HARNESS_CUDA13=1 also builds and runs it here;
#   HARNESS_TIME=1 also times the carried binary's launch paths at batch 256 (--time).
#   cpu: the CPU suite on this host's CPU (device hosts have AVX512-BF16 and AMX, the CPU machine
#   neither), auto and forced to each of CPU_PATHS (default: avx512_bf16), then benchmark_cpu.py
#   on 2 threads (the issue tables' machine) and on all.
#   deploy: AOTInductor packages on CUDA from C++ and Python; distributed: DDP over NCCL and
#   data-parallel inference on 1 and on every GPU (a 2-GPU kind).
#   savelib: after build, the built library (libalexconv.so, _build_info.py) into $OUT; a later
#   call carries them in build/devlib and starts with uselib instead of build (~140 s saved):
#   the package from this tree (PYTHONPATH) with that library. Steps that need the C++ build
#   (test_cpp_demo, test_aoti, test_saved_model's C++ half, deploy) still need build.
#
# Logs go to $OUT (the device tool's folder) or build/device-check; more than 8 files there are
# packed into $OUT/logs.tgz at the end (the device tool returns 8 at most).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-build/device-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
export ALEXCONV_REQUIRE_CUDA=1  # tests/conftest.py: no visible GPU fails the run
export ALEXCONV_SLOW_TESTS=1  # tests/conftest.py: the tests marked slow run here too, as in CI
steps=("$@"); [[ ${#steps[@]} -eq 0 ]] && steps=(build test forced emulate sanitize bench)
# The GPU classes the dispatcher can plan as on this card (op/cuda/dispatch.cpp): A100 (163 KB),
# the 99 KB parts (sm_86/89/120 plan alike) and Turing (64 KB).
EMULATED=${EMULATED:-8.0 8.6 7.5}
CUDA_TESTS="tests/test_correctness.py tests/test_cuda_runtime.py tests/test_invalid_inputs.py tests/test_fuzz.py tests/test_family.py"
declare -a summary

run_step() {  # name, command...
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '| %-22s | %-4s | %5ss |' "$name" "$([[ $rc == 0 ]] && echo ok || echo FAIL)" $((SECONDS - t0)))")
  return $rc
}

# memcheck runs without torch's caching allocator (see the sanitize step). torch reads
# the variable's presence, not its value: set for memcheck, unset otherwise.
uncached() {  # tool
  if [[ $1 == memcheck ]]; then export PYTORCH_NO_CUDA_MEMORY_CACHING=1; else unset PYTORCH_NO_CUDA_MEMORY_CACHING; fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
for step in "${steps[@]}"; do
  case $step in
    build)
      # The build folder persists between calls while a synced tree can carry source
      # times older than its objects: ninja would then keep a stale library. Touching
      # the sources forces a build of exactly this tree.
      find op -type f -exec touch {} +
      run_step build python3 -m pip install --no-build-isolation --no-deps -v -e . || break
      grep -E "spill|stack frame" "$OUT/build.log" | sort | uniq -c | head
      run_step barriers bash scripts/device/check_barriers.sh || break ;;
    savelib)
      python3 -c "import alexconv, alexconv._build_info as b; print(alexconv.library_path()); print(b.__file__)" |
        xargs -I{} cp {} "$OUT/" ;;
    uselib)
      cp build/devlib/libalexconv.so build/devlib/_build_info.py python/alexconv/ || break
      export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
      python3 -c "import alexconv; print('alexconv from', alexconv.library_path())" || break ;;
    test)
      ALEXCONV_FUZZ_PROFILE=${ALEXCONV_FUZZ_PROFILE:-device} run_step pytest \
        python3 -m pytest -q -ra -p no:cacheprovider --timeout 600 --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-} ;;
    forced)
      # The CUDA tests again with each kernel forced that auto does not pick everywhere on
      # this GPU: space-to-depth (larger batches only), mma_sync (what A100s run in 16 bits),
      # mma_sync_split (the 99 KB parts' register-gather kernels: float32 over four CTAs, 16-bit
      # over two), s2d_mma_sync (the portable space-to-depth kernel: every channel in one CTA
      # here, float32 accurate in two groups of 48), direct (the plain reference) and aten
      # (cuDNN, where none of ours can run a call).
      for kernel in ${FORCED:-s2d mma_sync mma_sync_split s2d_mma_sync direct aten}; do
        ALEXCONV_FUZZ_PROFILE=${ALEXCONV_FUZZ_PROFILE:-device} ALEXCONV_CUDA_KERNEL=$kernel \
          run_step "pytest-$kernel" python3 -m pytest -q -ra -p no:cacheprovider --timeout 600 -m cuda $CUDA_TESTS
      done ;;
    emulate)
      # The CUDA tests with the dispatcher planning as each other GPU class: the kernels
      # (or the ATen path) an A100, an L4 / A10G / RTX 40xx or a T4 would get.
      for cc in $EMULATED; do
        ALEXCONV_FUZZ_PROFILE=${ALEXCONV_FUZZ_PROFILE:-device} ALEXCONV_EMULATE_DEVICE=$cc \
          run_step "pytest-as-$cc" python3 -m pytest -q -ra -p no:cacheprovider --timeout 600 -m cuda $CUDA_TESTS
      done ;;
    sanitize|sanitize-a|sanitize-b|sanitize-c)
      # Every tool on the default engine for these small cases (wgmma on Hopper) and on the
      # space-to-depth kernel; memory and race checks on the portable engines too. memcheck
      # runs without torch's caching allocator: with it, an input ends inside a larger
      # block, and a read a few bytes past its end (what the copy engine's 16-byte units
      # could do) stays invisible.
      # sanitize-c: every tool on the portable kernels -- the 99 KB parts' split register-gather
      # kernels (forced), the portable space-to-depth kernel (forced: every channel in one CTA;
      # forced as sm_86, KERNEL@as-CC: two groups of 48, float32 accurate three of 32, which auto
      # leaves to the register gather at these small batches) and the A100 plan (emulated).
      runs=()
      case $step in
        sanitize-a) runs+=(memcheck:auto racecheck:auto initcheck:auto synccheck:auto memcheck:direct) ;;
        sanitize-b) runs+=(memcheck:s2d racecheck:s2d initcheck:s2d synccheck:s2d memcheck:mma_sync racecheck:mma_sync) ;;
        sanitize-c) for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
                      runs+=("$tool:mma_sync_split" "$tool:s2d_mma_sync" "$tool:s2d_mma_sync@as-8.6" "$tool:as-8.0"); done ;;
        sanitize) runs+=(memcheck:auto racecheck:auto initcheck:auto synccheck:auto memcheck:direct
                         memcheck:s2d racecheck:s2d initcheck:s2d synccheck:s2d memcheck:mma_sync racecheck:mma_sync)
                  for tool in memcheck racecheck initcheck synccheck; do
                    runs+=("$tool:mma_sync_split" "$tool:s2d_mma_sync" "$tool:s2d_mma_sync@as-8.6" "$tool:as-8.0"); done ;;
      esac
      [[ -n ${SANITIZE_RUNS:-} ]] && read -ra runs <<< "$SANITIZE_RUNS"  # tool:kernel pairs instead
      for run in "${runs[@]}"; do
        tool=${run%%:*} kernel=${run##*:}
        uncached "$tool"
        if [[ $kernel == *@as-* ]]; then  # a kernel forced while planning as another GPU class
          ALEXCONV_CUDA_KERNEL=${kernel%@*} ALEXCONV_EMULATE_DEVICE=${kernel#*@as-} run_step "sanitizer-$tool-$kernel" \
            compute-sanitizer --tool "$tool" --error-exitcode 1 python3 scripts/device/sanitize_cases.py
        elif [[ $kernel == as-* ]]; then
          ALEXCONV_EMULATE_DEVICE=${kernel#as-} run_step "sanitizer-$tool-$kernel" \
            compute-sanitizer --tool "$tool" --error-exitcode 1 python3 scripts/device/sanitize_cases.py
        else
          ALEXCONV_CUDA_KERNEL=$kernel run_step "sanitizer-$tool-$kernel" \
            compute-sanitizer --tool "$tool" --error-exitcode 1 python3 scripts/device/sanitize_cases.py
        fi
      done
      # Several tiles per CTA: the space-to-depth kernel's two accumulator sets (TMA and
      # element-load variants; 227 16-bit in auto too), the register-gather kernel in
      # multi-strip plans (auto at these batches), and its long runs (forced: auto sends
      # that case to the space-to-depth kernel on Hopper).
      if [[ $step == sanitize || $step == sanitize-a ]]; then
        for run in memcheck:s2d:many-tiles racecheck:s2d:many-tiles memcheck:auto:many-tiles \
                   racecheck:auto:many-tiles memcheck:wgmma:long-runs; do
          IFS=: read -r tool kernel cases <<< "$run"
          uncached "$tool"
          ALEXCONV_CUDA_KERNEL=$kernel run_step "sanitizer-$tool-$kernel-$cases" \
            compute-sanitizer --tool "$tool" --error-exitcode 1 python3 scripts/device/sanitize_cases.py "--$cases"
        done
      fi
      unset PYTORCH_NO_CUDA_MEMORY_CACHING ;;
    bench) run_step benchmark python3 scripts/bench/benchmark.py --quick --emulate $EMULATED --json "$OUT/bench.json" --plot "$OUT/bench.png" --markdown "$OUT/bench.md" ;;
    benchfull) run_step benchmark-full python3 scripts/bench/benchmark.py --sizes 224 227 256 512 --json "$OUT/bench.json" --plot "$OUT/bench.png" --markdown "$OUT/bench.md" ;;
    profile)
      # Hardware counters for one mode's kernel (PROFILE_MODE, default fp32; PROFILE_BATCH,
      # default 256), plus per-SASS-instruction stall samples (CSV) to read back on the CPU machine.
      # With ALEXCONV_EMULATE_DEVICE set, the kernel that class gets (e.g. 8.6: s2d_mma_sync's Halves).
      mode=${PROFILE_MODE:-fp32} batch=${PROFILE_BATCH:-256}
      kernels='regex:conv1_igemm_kernel|conv1_s2d_kernel|conv1_s2d_mma_sync_kernel'
      run_step "ncu-summary-$mode-b$batch" ncu --clock-control none --kernel-name "$kernels" --launch-skip 1 \
        --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section InstructionStats \
        --section MemoryWorkloadAnalysis python3 scripts/device/profile_kernel.py "$mode" --batch "$batch"
      ncu --clock-control none --kernel-name "$kernels" --launch-skip 1 --launch-count 1 \
        --section SourceCounters --page source --print-source sass --csv \
        python3 scripts/device/profile_kernel.py "$mode" --batch "$batch" > "$OUT/ncu-source-$mode-b$batch.csv" 2>&1 ;;
    ceiling|floor|operands|mma-ceiling)
      # Microbenchmarks without the kernels around them (benchmarks/micro): the wgmma
      # instruction's own ceiling, the floor of any wgmma design of the layer, the
      # float32 path's floor once its operands are formed, or mma.sync's rate alone and in the
      # portable space-to-depth kernel's consumer loop.
      case $step in ceiling) src=wgmma_ceiling ;; floor) src=design_floor ;; mma-ceiling) src=mma_sync_ceiling ;;
                    *) src=fp32_operands ;; esac
      mkdir -p build
      run_step "$step-build" nvcc -std=c++17 -O3 -arch=sm_90a -Xptxas -v -I op "benchmarks/micro/$src.cu" \
        -o "build/$src" || break
      cuobjdump --dump-sass "build/$src" | awk '/Function :/ {f = $3}
        /HGMMA|WARPGROUP|HMMA|LDSM/ {n[f] += /HGMMA/; a[f] += /WARPGROUP.ARRIVE/; d[f] += /WARPGROUP.DEPBAR/;
                                     h[f] += /HMMA/; l[f] += /LDSM/}
        END {for (f in n) print f, n[f], "HGMMA", a[f], "arrive", d[f], "depbar", h[f], "HMMA", l[f], "LDSM"}' > "$OUT/$step-sass.txt"
      run_step "$step" "build/$src" ;;
    harness)
      # The kernels without torch, launched by tests/cuda_harness on every path this GPU and the
      # emulated 8.0 / 8.6 classes take, every element against a float64 CPU reference. The CUDA
      # 11.8 binary (static runtime) cannot be built here (this machine's nvcc is CUDA 13):
      # scripts/dev/build_cuda_harness.sh builds it on the CPU machine, the device call carries it.
      # HARNESS_BIN: another carried build instead, e.g. build/cuda-harness-13 (nvcc 13 with 90a:
      # the Hopper kernels too, which CUDA 11.8 cannot build) -- the quick way to check and time
      # a kernel experiment without building the torch extension here.
      bin=${HARNESS_BIN:-build/cuda-harness-11.8/alexconv_cuda_harness}
      tag=$(basename "$(dirname "$bin")"); tag=${tag#cuda-}
      if [[ -x $bin ]]; then
        run_step "$tag" "$bin" ${HARNESS_ARGS:-}
        # Not harness-*: the summary reads those for "N passed, M failed", this one for its table.
        if [[ ${HARNESS_TIME:-0} == 1 ]]; then run_step "time-$tag" "$bin" --time ${HARNESS_TIME_ARGS:-}; fi
      else
        run_step "$tag" bash -c "echo 'no $bin: build it on the CPU machine with \
bash scripts/dev/build_cuda_harness.sh and carry its folder'; exit 1"
      fi
      # The same harness from this machine's nvcc, by default for this GPU's class only (9.0a on
      # Hopper: the wgmma and space-to-depth kernels too).
      if [[ ${HARNESS_CUDA13:-0} == 1 ]]; then
        cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
        [[ $cc == 90 ]] && cc=90a
        OUT_DIR=build/cuda-harness-device NVCC=$(command -v nvcc) ARCHS=${HARNESS_ARCHS:-$cc} \
          run_step harness-build bash scripts/dev/build_cuda_harness.sh &&
          run_step harness-device-nvcc build/cuda-harness-device/alexconv_cuda_harness ${HARNESS_ARGS:-}
      fi ;;
    cpu)
      lscpu | grep -E "Model name"
      echo "features: $(grep -o -w -E 'avx512f|avx512_bf16|avx512_fp16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
      for path in auto ${CPU_PATHS:-avx512_bf16}; do
        ALEXCONV_CPU_KERNEL=$path run_step "pytest-cpu-$path" python3 -m pytest -q -ra -p no:cacheprovider \
          --timeout 600 -m "not cuda" tests/test_cpu_kernel.py tests/test_fuzz.py tests/test_family.py \
          tests/test_correctness.py tests/test_invalid_inputs.py
      done
      for threads in 2 $(nproc); do
        run_step "benchmark-cpu-$threads" python3 scripts/bench/benchmark_cpu.py --threads "$threads" \
          --dtypes float32 bfloat16 --json "$OUT/bench-cpu-$threads.json"
      done ;;
    deploy)
      # The AOTInductor route on CUDA. The GPU machines' default compiler (/opt/gcc's g++) links
      # libstdc++ statically, and a package built by it segfaults while it loads
      # (docs/deployment.md): the export must pass it over for a g++ here that links
      # libstdc++.so.6 and say which (the TF32 package below, exported with CXX unset), and
      # the packages must load and match.
      echo "== inductor's default compiler: $(python3 -c 'from torch._inductor.cpp_builder import get_cpp_compiler as c; print(c())')"
      bin=$(python3 -c "import alexconv, os; print(os.path.dirname(alexconv.library_path()) + '/bin')")
      # A package compile is minutes of one core: the TF32 package (timed at batch 256 from C++)
      # compiles beside the tests' float32 and bfloat16 ones (run from C++ and Python).
      (unset CXX; python3 -m alexconv.export /tmp/aoti-tf32.pt2 --device cuda --allow-tf32) > "$OUT/aoti-export-tf32.log" 2>&1 &
      export_pid=$!
      export CXX=${AOTI_CXX:-$(python3 -c 'from alexconv import _toolchain as t; print(t.find_compiler_linking_shared_libstdcxx() or "")')}
      echo "== CXX=$CXX"
      run_step pytest-deploy python3 -m pytest -q -ra -p no:cacheprovider --timeout 600 \
        tests/test_aoti.py tests/test_toolchain.py -k "cuda or toolchain"
      wait $export_pid; export_rc=$?
      grep -E '^(note|saved|error)' "$OUT/aoti-export-tf32.log"  # which compiler it took, or why not
      [[ $export_rc == 0 ]] || summary+=("$(printf '| %-22s | %-4s | %5ss |' aoti-export-tf32 FAIL -)")
      [[ $export_rc == 0 ]] && run_step aoti-demo-tf32 "$bin/alexconv_aoti_demo" /tmp/aoti-tf32.pt2 --device cuda --batch 256 --size 224 --iters 20
      unset CXX ;;
    distributed)
      # DDP training over NCCL (2+ GPUs; gloo on CPU always), then data-parallel inference on 1
      # and on every GPU with the same per-GPU batch: the scaling figure.
      run_step pytest-distributed python3 -m pytest -q -ra -p no:cacheprovider --timeout 600 tests/test_distributed.py
      gpus=$(nvidia-smi --list-gpus | wc -l)
      for n in 1 $gpus; do
        run_step "infer-$n-gpu" python3 -m torch.distributed.run --standalone --nproc_per_node "$n" \
          scripts/infer_distributed.py --device cuda --num-images $((512 * n)) --size 224 --batch 256 \
          --iters ${INFER_ITERS:-100} --json "$OUT/infer-$n-gpu.json"
        [[ $n == "$gpus" ]] && break
      done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done

echo
echo "| step                   | rc   | time   |"
echo "|------------------------|------|--------|"
printf '%s\n' "${summary[@]}"
for f in "$OUT"/pytest*.log; do [[ -f $f ]] && echo "$(basename "$f" .log): $(grep -hE "(passed|failed).* in [0-9.]+s" "$f" | tail -1)"; done
grep -h "^fuzz:" "$OUT/pytest.log" 2>/dev/null
for f in "$OUT"/harness-*.log; do
  [[ -f $f ]] && echo "$(basename "$f" .log): $(grep -hE "^[0-9]+ passed, [0-9]+ failed$|^no .*harness" "$f" | tail -1)"
done
for f in "$OUT"/infer-*-gpu.json; do [[ -f $f ]] && echo "$(basename "$f" .json): $(tr -d ' \n' < "$f")"; done
for f in "$OUT"/sanitizer-*.log; do
  [[ -f $f ]] && echo "$(basename "$f" .log): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$f" | tail -1)"
done
[[ -f "$OUT/bench.md" ]] && tail -n 15 "$OUT/bench.md"
for f in "$OUT"/ceiling.log "$OUT"/floor.log "$OUT"/operands.log "$OUT"/mma-ceiling.log "$OUT"/time-harness-*.log; do [[ -f $f ]] && grep "^|" "$f"; done
printf '%s\n' "${summary[@]}" | grep -q FAIL && failed=1 || failed=0
# The device tool brings back at most 8 files from $OUT: past that, everything but the library
# (savelib) goes back as one archive, logs.tgz (tar xzf it here).
if (( $(find "$OUT" -type f | wc -l) > 8 )); then
  tar czf /tmp/device-check-logs.tgz -C "$OUT" --exclude=libalexconv.so --exclude=_build_info.py . &&
    find "$OUT" -mindepth 1 -not -name libalexconv.so -not -name _build_info.py -delete &&
    mv /tmp/device-check-logs.tgz "$OUT/logs.tgz" && echo "logs: $OUT/logs.tgz"
fi
exit $failed
