# Sourced by a device call's script (repository root, after the stage's install.sh): the site paths, the run
# environment, and `item NAME LIMIT CMD...`, which runs one job of the call with at most LIMIT seconds (less if the
# call's CALL seconds, default 585, run out first), logs it to $OUT/NAME.log, prints its exit status and the log's
# last $TAIL (25) lines, and kills what the job left running (engines, Ray) so the next job starts clean.
#
#   source benchmarks/gpu/call_env.sh
#   item gap 300 env PYTHONPATH=$SG python3 -m benchmarks.gpu.sglang_gap --data DATA/train.parquet --out $OUT/gap
#
# `keep DIR NAME` packs DIR (a benchmark's --out: its logs, metrics, results) into $OUT/NAME.tgz, whether or not the
# job finished. A call brings back no file whose name has an '@' (`sglang@flashmb.log`), and a job cut by its limit
# never writes its own archive (session 14 lost the cut vLLM engine's log that way).
export VERL_CACHE_DIR=/tmp/verl_cache PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false VLLM_USE_V2_MODEL_RUNNER=0
SG=/tmp/site-sglang:/tmp/site-common:/tmp/site-model:$PWD
VL=/tmp/site-vllm:/tmp/site-common:/tmp/site-model:$PWD
MC=/tmp/site-mcore:/tmp/site-common:/tmp/site-model:$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# START: when the call began, in seconds since the epoch (`S=$(date +%s)` before the install), so that it means the
# same in this shell as in the one that set it: bash's SECONDS counts from each shell's own start, and session 36's
# call A, given `START=$SECONDS` of its parent shell (0), never counted the install and ran past 600 s
START=${START:-$(date +%s)}
# a device call ends at 600 s; a job's cleanup, its archive and the copy back need the last 15 (session 35's call A,
# given CALL=592, ran past 600 and lost its archive)
if [ "${CALL:-585}" -gt 585 ]; then echo "== CALL=$CALL leaves no room to bring the files back: using 585"; CALL=585; fi

left() { echo $((${CALL:-585} - ($(date +%s) - START))); }

item() {
  local name=$1 limit=$2
  shift 2
  local room=$(($(left) - 10))
  [ "$room" -lt "$limit" ] && limit=$room
  if [ "$limit" -lt 20 ]; then
    echo "== $name: skipped (less than 20 s for it in this call)"
    return
  fi
  echo "== $name: start $(date +%T), limit $limit s"
  local begin=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name: exit $? after $((SECONDS - begin)) s"
  python3 -m benchmarks.gpu.leftovers  # spares this shell, whose command line may name an engine
  sleep 2
  tail -n "${TAIL:-25}" "$OUT/$name.log"
}

keep() {
  [ -d "$1" ] && tar -czf "$OUT/$2.tgz" -C "$1" . && echo "== kept $1 as $OUT/$2.tgz"
}
