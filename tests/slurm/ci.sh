#!/bin/bash
# `make slurm-test`: proof that `ina3d sweep --slurm` works on a real scheduler.
#
# Starts a single-node Slurm cluster (tests/slurm/cluster.sh: installs slurm-wlm + munge
# when missing), runs the 4-cell grid tests/slurm/grid.toml once locally and once as a
# Slurm job array (`sbatch --wait`), and requires the two collected sweep.csv to be equal
# byte for byte, with every cell run by an array task. The daemons are stopped on exit,
# whatever happened. Run from the repository root.
set -euo pipefail

state=${1:-target/slurm}
bin=${INA3D_BIN:-target/debug/ina3d}
grid=tests/slurm/grid.toml
here=$(cd "$(dirname "$0")" && pwd)

[ -x "$bin" ] || { echo "slurm-test: $bin not built (make build)" >&2; exit 1; }
rm -rf "$state"
mkdir -p "$state"
state=$(cd "$state" && pwd)
trap '"$here/cluster.sh" stop "$state"' EXIT
"$here/cluster.sh" start "$state"
export SLURM_CONF=$state/slurm.conf

t0=$(date +%s)
"$bin" sweep "$grid" -o "$state/local" --jobs 2
# A scheduler that never runs the array must fail the target, not hang CI.
timeout 600 "$bin" sweep "$grid" -o "$state/slurm" --slurm --wait --array-limit 2 || {
    echo "slurm-test: the Slurm sweep failed or timed out (squeue: $(squeue -h 2>&1 | head -5))" >&2
    exit 1
}
tasks=$(find "$state/slurm/slurm" -name '*_*.out' | wc -l)
if [ "$tasks" -ne 4 ]; then
    echo "slurm-test: expected 4 array task logs, found $tasks" >&2
    exit 1
fi
if ! cmp "$state/local/sweep.csv" "$state/slurm/sweep.csv"; then
    diff "$state/local/sweep.csv" "$state/slurm/sweep.csv" | head -20 >&2
    echo "slurm-test: the sweep collected from Slurm differs from the local one" >&2
    exit 1
fi
rows=$(($(wc -l <"$state/slurm/sweep.csv") - 1))
echo "slurm-test: 4 cells through sbatch ($tasks array tasks), sweep.csv ($rows rows) identical to the local run; $(($(date +%s) - t0)) s"
