//! Examples shown under every subcommand's help (`-h` and `--help`), on the bundled job
//! (`traces/example/`) where a file is needed. A test parses every example with the real
//! argument parser, so a renamed flag cannot leave a stale example behind.

/// (subcommand path, examples) — the path as typed after `ina3d`.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "parse",
        "  ina3d parse traces/example/megatron.log               # the job the bundled log ran
  ina3d parse traces/example/pretrain_gpt_16gpu.sh -v   # a launch script, values' sources
  ina3d parse gpt3-13b --tp 8 --pp 2 --dp 4 --json      # a preset, resized; JSON reads back",
    ),
    (
        "trace",
        "  ina3d trace traces/example/megatron.log --topology fat-tree:k=4,gpus-per-server=2 -o ring.csv.gz
  ina3d trace traces/example/megatron.log --topology fat-tree:k=4,gpus-per-server=2 \\
        --ina hierarchical --ina-classes dp --ina-slots 2048 -o ina-dp.csv.gz
  ina3d trace traces/example/tiny.toml --topology fat-tree:k=4 \\
        --collective-bench all-reduce --sizes 1MiB..256MiB --group dp -o bench.csv",
    ),
    (
        "plan",
        "  ina3d plan traces/example/megatron.log --topology fat-tree:k=4,gpus-per-server=2 -o plan.json
  ina3d plan traces/example/tiny.toml --topology fat-tree:k=4 --ina-slots 1024 \\
        --solver heuristic --verify -o plan.json
  ina3d trace traces/example/tiny.toml --topology fat-tree:k=4 --ina-slots 1024 \\
        --plan plan.json -o planned.csv.gz",
    ),
    (
        "inspect",
        "  ina3d inspect ring.csv.gz   # records and bytes per class, groups, warm-up
  ina3d inspect ring.csv.gz --json                          # the same as JSON",
    ),
    (
        "replay",
        "  ina3d replay ring.csv.gz -o out/replay
  ina3d replay ring.csv.gz --rate-model dcqcn -o out/dcqcn   # DCQCN-capped rates (RoCE)
  ina3d replay --from gpt3-175b --topology fat-tree:k=16 --tp 8 --pp 8 --dp 16 -o out/big
  ina3d replay ring.csv.gz -o out/replay --timeline out/t.json   # open in ui.perfetto.dev
  ina3d replay ring.csv.gz -o out/replay --timeline out/t.json --timeline-ranks 0-7,8",
    ),
    (
        "ns3 emit",
        "  ina3d ns3 emit ring.csv.gz -o out/ns3                     # then: ina3d ns3 run out/ns3
  ina3d ns3 emit ring.csv.gz --flavor simai -o out/simai    # SimAI's dialect of the HPCC files
  ina3d ns3 emit ring.csv.gz --transport tcp -o out/ns3-tcp",
    ),
    (
        "ns3 run",
        "  ina3d ns3 run out/ns3   # fct.csv, fct.txt, summary.csv in out/ns3
  ina3d ns3 run out/ns3 --glue ~/ns3-glue/ina3d-ns3   # a glue binary built elsewhere",
    ),
    (
        "ns3 ingest",
        "  ina3d ns3 ingest out/ns3/fct.txt -o out/tidy   # HPCC fct rows with named columns
  ina3d ns3 ingest simai-run/EndToEnd.csv -o out/tidy       # SimAI's per-layer table",
    ),
    (
        "export aicb",
        "  ina3d export aicb traces/example/megatron.log -o workload.txt
  ina3d export aicb gpt3-175b --tp 8 --pp 8 --dp 16 -o gpt3-175b.txt",
    ),
    (
        "export chakra",
        "  ina3d export chakra traces/example/megatron.log -o chakra   # chakra/workload.<rank>.et
  ina3d export chakra gpt3-13b --tp 8 --pp 2 --dp 4 --prefix gpt3 -o chakra-gpt3",
    ),
    (
        "compare",
        "  ina3d compare --replay out/replay --ns3 out/ns3 -o out/cmp
  ina3d compare --replay out/replay --ns3 hpcc-run/fct.txt --emit out/ns3 -o out/cmp-hpcc
  ina3d compare --replay out/replay --ns3 simai-run/EndToEnd.csv -o out/cmp-simai",
    ),
    (
        "run",
        "  ina3d run -o out/example   # the bundled 16-GPU job, every policy
  ina3d run --seeds 0,1,2,3 --policies ring,ina-dp,plan -o out/seeds   # median, range
  ina3d run traces/example/tiny.toml --ns3 -o out/tiny      # replay and ns-3 side by side
  ina3d run traces/example/tiny.toml --timeline -o out/tl   # out/tl/<policy>/timeline.json",
    ),
    (
        "sweep",
        "  ina3d sweep notebooks/slots.toml -o out/slots --jobs 2
  ina3d sweep notebooks/study.toml -o out/study --slurm --partition gpu --wait
  ina3d sweep collect out/study                  # sweep.csv and sweep.svg of the done cells",
    ),
    (
        "cluster",
        "  ina3d cluster notebooks/cluster.toml -o out/cluster   # three jobs, a sweep of placements
  ina3d cluster my-cluster.toml --ns3 -o out/cluster-ns3   # also each merged trace on ns-3",
    ),
    (
        "validate",
        "  ina3d validate --ci -o out/validate                       # the CI subset of the suite
  ina3d validate --transport tcp -o out/validate-tcp        # every case against the TCP glue
  ina3d validate --trace ring.csv.gz -o out/mine            # your own trace, same ensemble",
    ),
];

/// The widest example line: clap wraps help at 100 columns, which would break a command.
#[cfg(test)]
pub const MAX_LINE: usize = 98;

/// The examples of `path` as a help section.
pub fn section(path: &str) -> Option<String> {
    EXAMPLES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| format!("Examples:\n{text}"))
}

/// `cmd` with its subcommands' examples after their help (`-h` shows them alone,
/// `--help` puts them before the subcommand's longer notes).
pub fn attach(mut cmd: clap::Command) -> clap::Command {
    fn walk(c: clap::Command, prefix: &str) -> clap::Command {
        let subs: Vec<String> = c
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        let mut c = c;
        for name in subs {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix} {name}")
            };
            c = c.mut_subcommand(&name, |s| {
                let s = walk(s, &path);
                let Some(ex) = section(&path) else { return s };
                let long = match s.get_after_long_help() {
                    Some(more) => format!("{ex}\n\n{more}"),
                    None => ex.clone(),
                };
                s.after_help(ex).after_long_help(long)
            });
        }
        c
    }
    cmd = walk(cmd, "");
    cmd
}

/// Each example as the argument list a shell would pass (continuation lines joined,
/// comments dropped; only simple words, which is all the examples use).
#[cfg(test)]
pub fn argument_lists() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (path, text) in EXAMPLES {
        let joined = text.replace("\\\n", " ");
        for line in joined.lines() {
            let line = line.split(" # ").next().unwrap_or("").trim();
            let first = line.split(" && ").next().unwrap_or("");
            if first.starts_with("ina3d ") {
                out.push((
                    (*path).to_string(),
                    first.split_whitespace().map(String::from).collect(),
                ));
            }
        }
    }
    out
}
