#!/usr/bin/env bash
# The GPU check: fedgame's CUDA tests and the GPU figures of its benches, in one run of about
# eight minutes on one H100 (each step has its own time limit, so one slow step cannot eat the
# others). Run it from the repository root on a machine with a CUDA GPU:
#
#     bash bench/gpu_check.sh [OUTDIR]        # log: OUTDIR/gpu_check.log (default results/)
#
# Steps: the machine; the CUDA tests (a whole scenario on CUDA against the CPU run, the
# batched learner on CUDA against the CPU, devices and the manifest); the batched learner
# against a plain torch.func vmap; seconds per round end to end, learner alone and the
# per-client loop for N = 1,000 (uniform and strategic mix) and N = 100,000 (K = 100 and
# 1,000); the population-scale scenario for N = 10^3 ... 10^6 (needs Fashion-MNIST, see the
# README); one, two and four servers at equal total clients; a 16-run sweep on the local pool
# against the batched executor (one worker per GPU each); then, on the same machine's CPU
# with one torch thread, the four bookkeeping cases of round_speed (a quiet-CPU reading).
set -u
out=${1:-results}
mkdir -p "$out"
log="$out/gpu_check.log"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

step() {  # step SECONDS TITLE -- COMMAND...: run with a limit, say how it ended
    local limit=$1 title=$2
    shift 3
    echo
    echo "=== $title (limit ${limit}s)"
    local t0=$SECONDS
    timeout "$limit" "$@"
    local rc=$?
    echo "=== $title: exit $rc after $((SECONDS - t0))s"
}

{
    # the commit, and how many files differ from it (a copied tree may carry edits)
    echo "gpu_check at $(git rev-parse --short HEAD 2>/dev/null || echo '?') with" \
        "$(git status --short 2>/dev/null | wc -l) changed files, $(date -u +%FT%TZ)"
    step 30 "machine" -- bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version \
        --format=csv,noheader; $py -c 'import sys, torch; print(sys.version.split()[0], \
        torch.__version__, torch.cuda.get_device_name(0), torch.cuda.is_available())'"
    step 150 "CUDA tests" -- "$py" -m pytest -p no:cacheprovider -rfEs -q \
        tests/run/test_devices.py tests/learning/test_device.py tests/learning/test_batched.py
    step 60 "learner vs plain vmap" -- "$py" bench/learner_limit.py --device cuda --rounds 20
    for case in uniform-1000 mixed-1000; do
        step 60 "round speed $case" -- "$py" bench/round_speed.py --device cuda --case "$case" \
            --rounds 10
    done
    for k in 100 1000; do
        step 75 "round speed uniform-100000 K=$k" -- "$py" bench/round_speed.py --device cuda \
            --case uniform-100000 --selected "$k" --rounds 5
    done
    step 120 "population scale" -- "$py" bench/population_scale.py --device cuda --rounds 5 \
        --warmup 1 --threads 1
    step 60 "servers" -- "$py" bench/servers.py --device cuda
    step 120 "sweep: local vs batched" -- "$py" bench/sweep_speed.py --device cuda \
        --executors local,batched --rounds 50
    for case in uniform-1000 mixed-1000 uniform-100000 mixed-100000; do
        step 60 "round speed $case on the CPU" -- "$py" bench/round_speed.py --device cpu \
            --threads 1 --case "$case" --rounds 10
    done
} 2>&1 | tee "$log"
