#!/usr/bin/env bash
# Stage the common wheel set without Ray (about 4 MB: Hydra, OmegaConf, tensordict, ...) as one part, .stage-cm/1,
# for a device call that runs only benchmarks/bench_gpu_update.py (no engine, no Ray): no need for the full stage.
#
#   benchmarks/gpu/stage_common.sh        (after benchmarks/gpu/stage.sh filled the wheel cache)
#   device call, carry [".stage-cm/1"]:   S=$(date +%s); bash .stage-cm/1/install.sh; START=$S CALL=300 bash benchmarks/gpu/calls.sh shapes
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
cache=${WHEEL_CACHE:-$HOME/.cache/verl-gpu-wheels}/common
out=.stage-cm
wheels=$(cd "$cache" && ls *.whl | grep -v '^ray-')
[ -n "$wheels" ] || { echo "no wheels in $cache: run benchmarks/gpu/stage.sh (or prepare_session.sh) first" >&2; exit 1; }
grep -qx "/$out/" .git/info/exclude 2>/dev/null || echo "/$out/" >> .git/info/exclude
rm -rf "$out"; mkdir -p "$out/1"
(cd "$cache" && tar -cf "$root/$out/1/common-noray.tar" $wheels)
cat > "$out/1/install.sh" <<'INNER'
#!/usr/bin/env bash
# Runs on the GPU machine: the common wheel set without Ray into /tmp/site-common (benchmarks/gpu/call_env.sh's paths).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d); tar -xf "$here/common-noray.tar" -C "$d"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site-common "$d"/*.whl
echo "installed $(ls "$d"/*.whl | wc -l) wheels into /tmp/site-common"
INNER
echo "ready: $out/1 ($(du -sh "$out/1" | cut -f1))"
