#!/usr/bin/env bash
# Usage: VARIANTS="base NAME[:FLAGS][@PATCH] ..." [CASES=...] [ROUNDS=2] bash scripts/bench/ab_builds.sh
# A/B timing of kernel variants built side by side, the method behind docs/perf-notes.md:
# each variant is a copy of this tree's op/ (optionally patched) built with its own CUDA
# flags; scripts/bench/ab_time.py then times the variants in alternating processes, so that all
# of them see the same device, clock and power state, and keeps each case's best median.
#
#   VARIANTS="base noepi:-DALEXCONV_MEASURE_EPILOGUE=2@measure_epilogue.patch" \
#   CASES="fp32:224:256 fp16:224:256" ROUNDS=2 bash scripts/bench/ab_builds.sh
#
# A variant is name[:extra CUDA flags][@patch[+patch...] applied with -p1]; commas in the
# flags stand for spaces (-DA=1,-DB=2). The first variant is the base the ratios divide by.
# A case is mode:size:batch[:cl|:wcl], mode one of fp32, tf32, fp16, bf16; :cl a channels_last input, :wcl a channels_last weight (ab_time.py). Set ALEXCONV_CUDA_KERNEL to force a kernel path in every variant.
# Needs a CUDA torch; logs and JSON go to $OUT (the device tool's folder) or build/ab.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-build/ab}
WORK=build/ab-variants
mkdir -p "$OUT" "$WORK"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
read -r -a variants <<< "${VARIANTS:-base}"

build_variant() {  # spec -> builds $WORK/<name>/build/libalexconv.so
  local spec=$1 name flags="" patch=""
  [[ $spec == *@* ]] && { patch=${spec#*@}; spec=${spec%%@*}; }
  name=${spec%%:*}
  [[ $spec == *:* ]] && flags=${spec#*:} && flags=${flags//,/ }
  local dir=$WORK/$name
  rm -rf "$dir/src" && mkdir -p "$dir/src"
  cp -r op cmake CMakeLists.txt "$dir/src/"
  local one
  for one in ${patch//+/ }; do patch -s -p1 -d "$dir/src" < "$one" || return 1; done
  cmake -S "$dir/src" -B "$dir/build" -G Ninja -DALEXCONV_CUDA=ON -DALEXCONV_BUILD_DEMO=OFF \
    -DCMAKE_CUDA_FLAGS="$flags" -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/build-$name.log" 2>&1 &&
    cmake --build "$dir/build" --target alexconv >> "$OUT/build-$name.log" 2>&1
}

t0=$SECONDS
pids=() libs=()
for spec in "${variants[@]}"; do
  build_variant "$spec" & pids+=($!)
  name=${spec%%@*}; name=${name%%:*}
  libs+=("$name=$WORK/$name/build/libalexconv.so")
done
rc=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "build of ${variants[$i]} failed:"; tail -n 30 "$OUT/build-${libs[$i]%%=*}.log"; rc=1
  fi
done
echo "== built ${#variants[@]} variant(s) in $((SECONDS - t0)) s"
grep -H -E "spill|stack frame" "$OUT"/build-*.log | grep -v " 0 bytes spill" | sort | uniq -c | head -20
[[ $rc == 0 ]] || exit 1
python3 scripts/bench/ab_time.py --rounds "${ROUNDS:-2}" --cases ${CASES:-fp32:224:256} \
  --json "$OUT/ab.json" "${libs[@]}"
