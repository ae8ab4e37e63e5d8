#!/usr/bin/env bash
# Re-makes the fuzz corpus (tests/fuzz/corpus/) from the bundled example, with the ina3d
# binary given as $1 (default: target/debug/ina3d) and the ns-3 glue for the compare
# target. Run from the crate root; review the diff before committing. Each file is a small
# valid input of one reader; tests/fuzz_readers.rs mutates them.
set -euo pipefail
B=${1:-target/debug/ina3d}
C=tests/fuzz/corpus
FABRIC=fat-tree:k=4,gpus-per-server=2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rm -rf "$C" && mkdir -p "$C"/{trace,trace-gz,topology,megatron,job,cluster,sweep,plan,ingest,glue,compare/replay,compare/ns3,starts,aicb,chakra}

# trace CSV, plain and gzip (the tiny job: 8 GPUs, 272 records)
$B trace traces/example/tiny.toml --topology $FABRIC -o $C/trace/t.csv >/dev/null
$B trace traces/example/tiny.toml --topology $FABRIC -o $C/trace-gz/t.csv.gz >/dev/null
# a topology file: what `ns3 emit` writes for the fabric
$B ns3 emit $C/trace/t.csv -o "$T/emit" >/dev/null
cp "$T/emit/topology.txt" $C/topology/
# Megatron: the example log, its launch script, a key=value log
cp traces/example/megatron.log $C/megatron/megatron.log
cp traces/example/pretrain_gpt_16gpu.sh $C/megatron/launch.sh
cp tests/fixtures/megatron/keyvalue_fork.log $C/megatron/keyvalue.log
cp traces/example/tiny.toml $C/job/job.toml
# a cluster of two tiny jobs, ring and atp only (each case is a whole cluster run)
cat > $C/cluster/cluster.toml <<TOML
topology = "fat-tree:k=4,gpus-per-server=2"
ina-slots = 1024
policies = ["ring", "atp"]
seed = 3
[[job]]
name = "a"
input = "traces/example/tiny.toml"
set = { hidden_size = 512, global_batch_size = 16 }
start-ns = 1000
[[job]]
name = "b"
input = "traces/example/tiny.toml"
placement = "interleaved"
TOML
cat > $C/sweep/grid.toml <<TOML
filter = "not (collective == 'hd' and tp > 1) and ina-slots * 2 >= 512 - 1"
[base]
input = "traces/example/tiny.toml"
ns3 = "off"
seeds = "0,1"
[axes]
ina-slots = [256, 8192]
collective = ["ring", "hd"]
nccl-channels = [1, 2]
[[zip]]
tp = [1, 2]
dp = [4, 2]
TOML
$B plan traces/example/tiny.toml --topology $FABRIC -o $C/plan/plan.json >/dev/null
# ns-3 outputs as `ns3 ingest` reads them: HPCC fct.txt (SimAI's), pfc and qlen rows,
# SimAI's EndToEnd.csv, a summary.csv
head -12 tests/fixtures/simai/fct.head40.txt > $C/ingest/fct.txt
printf '2000000 12 1 3 1\n2004000 12 1 3 0\n2100000 5 0 1 1\n' > $C/ingest/pfc.txt
printf '1000 12 3 4096\n2000 12 3 0\n3000 5 1 81920\n' > $C/ingest/qlen.txt
cp tests/fixtures/simai/EndToEnd.csv $C/ingest/EndToEnd.csv
$B replay $C/trace/t.csv --rate-model ideal -o "$T/replay" >/dev/null
cp "$T/replay/summary.csv" $C/ingest/summary.csv
# the glue's inputs, re-emitted by `ns3 emit trace.txt`
cp "$T/emit/trace.txt" "$T/emit/params.txt" "$T/emit/topology.txt" $C/glue/
# compare: a replay and an ns-3 run of the same trace
cp "$T/replay"/{fct.csv,summary.csv,links.csv,switches.csv} $C/compare/replay/
$B ns3 run "$T/emit" >/dev/null
cp "$T/emit"/{fct.csv,summary.csv,links.csv,switches.csv} $C/compare/ns3/
# a replay's fct.csv as `ns3 emit --starts`
cp $C/trace/t.csv $C/starts/t.csv
cp "$T/replay/fct.csv" $C/starts/fct.csv
# what other simulators read: an AICB workload and one rank's Chakra trace
$B export aicb traces/example/tiny.toml -o $C/aicb/workload.txt >/dev/null
$B export chakra traces/example/tiny.toml -o "$T/chakra" >/dev/null 2>&1
cp "$T/chakra/workload.0.et" $C/chakra/
du -sh $C
