//! `ina3d run`: the main job. From one Megatron input to `results.csv`, one row per INA
//! policy.
//!
//! For each policy it runs the same stage commands a user would type — `ina3d trace`,
//! `ina3d replay`, and with ns-3 `ina3d ns3 emit` / `ina3d ns3 run` — as child processes of
//! this very binary, printing each command line first. Why child processes rather than
//! library calls: every intermediate then sits on disk exactly as the stand-alone commands
//! write it, and a user can re-run any single step by copying the printed line. The
//! comparison with ns-3 and the results table are made in-process by `ina3d::report`.
//!
//! Layout of `-o DIR`:
//!
//! ```text
//! DIR/results.csv                 one row per policy (see README "Outputs and their columns")
//! DIR/<policy>/trace.csv.gz       the trace of that policy
//! DIR/<policy>/replay/            fct.csv, fct.txt, summary.csv, links.csv, switches.csv
//! DIR/<policy>/ns3/               ns-3 inputs and outputs (with ns-3 only)
//! DIR/<policy>/compare/           fct_error.csv, iteration.csv, flows.csv (with ns-3 only)
//! ```

use std::path::PathBuf;

/// The input used when none is given: the bundled example log (16 GPUs, TP2·PP2·DP4).
pub const DEFAULT_INPUT: &str = "traces/example/megatron.log";

/// The topology used when none is given: a k=4 fat-tree (16 hosts, 2 per ToR) with
/// 2-GPU NVLink servers, so one server sits under each ToR. For the example's rank
/// order this keeps each TP pair inside its server's NVLink (as Megatron deployments do)
/// and spreads every DP group over four ToRs in two pods, so DP traffic crosses the
/// switches INA can use; pipeline traffic crosses the pods too.
pub const DEFAULT_TOPOLOGY: &str = "fat-tree:k=4,gpus-per-server=2";

/// ns-3 runs on its own (without `--ns3`) only when it is installed and the trace moves at
/// most this many payload bytes over the network (net + INA records, all classes). Packet-level
/// cost grows with bytes, not records: measured here, the glue needs ≈ 0.1 s per MB of TCP
/// and ≈ 0.05 s per MB of INA traffic (256 B slots), so this bound keeps one policy under
/// about half a minute; the bundled 16-GPU example moves ≈ 10 GB and is replay-only unless
/// `--ns3` is given (then expect tens of minutes).
#[cfg_attr(not(feature = "tables"), allow(dead_code))]
pub const AUTO_NS3_MAX_NET_BYTES: u64 = 256 << 20;

/// Arguments of `ina3d run`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ina3d::topology::Topology::SPEC_HELP)]
pub struct Args {
    /// Megatron log, launch script, TOML/JSON config or preset name.
    #[arg(default_value = DEFAULT_INPUT)]
    pub input: String,
    /// Topology spec or HPCC topology file (see `ina3d trace --help`).
    #[arg(long, default_value = DEFAULT_TOPOLOGY)]
    pub topology: String,
    /// Also run every policy on ns-3 and compare it with the replayer. Without this flag
    /// ns-3 still runs when it is installed and the trace moves at most 256 MiB over the network.
    #[arg(long, conflicts_with = "no_ns3")]
    pub ns3: bool,
    /// Never run ns-3.
    #[arg(long)]
    pub no_ns3: bool,
    /// Aggregator slots per switch for the INA policies.
    #[arg(long, default_value_t = 8192, value_name = "N")]
    pub ina_slots: u64,
    /// INA algorithm of the INA policies (`ina3d trace --ina`).
    #[arg(long, default_value = "hierarchical", value_name = "ALGO")]
    pub ina: String,
    /// Output directory.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
}

/// One INA policy: which traffic classes may use the switches' aggregators.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "tables"), allow(dead_code))]
pub struct Policy {
    /// Row name in `results.csv` and directory name.
    pub name: &'static str,
    /// `--ina-classes` value; `None` means INA off (the ring baseline).
    pub classes: Option<&'static str>,
}

/// The policies of the main job, ring first (every speed-up is measured against it).
#[cfg_attr(not(feature = "tables"), allow(dead_code))]
pub const POLICIES: [Policy; 4] = [
    Policy {
        name: "ring",
        classes: None,
    },
    Policy {
        name: "ina-dp",
        classes: Some("dp"),
    },
    Policy {
        name: "ina-tp",
        classes: Some("tp"),
    },
    Policy {
        name: "ina-tp-dp",
        classes: Some("tp,dp"),
    },
];

/// Run `ina3d run`.
#[cfg(feature = "tables")]
pub fn run(a: Args) -> anyhow::Result<()> {
    use anyhow::Context;
    use ina3d::report::{self, PolicyResult};

    if a.ina_slots == 0 {
        anyhow::bail!(
            "--ina-slots 0: the INA policies need at least one aggregator slot per switch"
        );
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let exe = std::env::current_exe().context("locating the ina3d binary")?;
    let ns3_installed = std::path::Path::new("/usr/include/ns3/core-module.h").exists();
    let mut rows = Vec::new();
    for p in POLICIES {
        let dir = a.out.join(p.name);
        let trace = dir.join("trace.csv.gz");
        let replay_dir = dir.join("replay");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

        let mut targs: Vec<String> = vec![
            "trace".into(),
            a.input.clone(),
            "--topology".into(),
            a.topology.clone(),
        ];
        match p.classes {
            None => targs.extend(["--ina".into(), "off".into()]),
            Some(c) => targs.extend([
                "--ina".into(),
                a.ina.clone(),
                "--ina-classes".into(),
                c.into(),
                "--ina-slots".into(),
                a.ina_slots.to_string(),
            ]),
        }
        targs.extend(["-o".into(), path_arg(&trace)]);
        stage(&exe, p.name, &targs)?;
        stage(
            &exe,
            p.name,
            &[
                "replay".into(),
                path_arg(&trace),
                "--topology".into(),
                a.topology.clone(),
                "-o".into(),
                path_arg(&replay_dir),
            ],
        )?;
        let replay = report::read_summary(&replay_dir.join("summary.csv"))?;

        let with_ns3 =
            a.ns3 || (!a.no_ns3 && ns3_installed && net_bytes(&replay) <= AUTO_NS3_MAX_NET_BYTES);
        let ns3 = if with_ns3 {
            let ns3_dir = dir.join("ns3");
            stage(
                &exe,
                p.name,
                &[
                    "ns3".into(),
                    "emit".into(),
                    path_arg(&trace),
                    "--topology".into(),
                    a.topology.clone(),
                    "--slots".into(),
                    a.ina_slots.to_string(),
                    "-o".into(),
                    path_arg(&ns3_dir),
                ],
            )?;
            stage(
                &exe,
                p.name,
                &["ns3".into(), "run".into(), path_arg(&ns3_dir)],
            )?;
            let opts = report::CompareOptions {
                ignore_trace_name: false,
                link_tolerance: None,
            };
            let c = report::compare_with(&replay_dir, &ns3_dir, &opts)
                .with_context(|| format!("policy `{}`: comparing replay with ns-3", p.name))?;
            c.write(&dir.join("compare"))?;
            eprintln!("[{}] replayer vs ns-3:", p.name);
            super::compare::print_comparison(&c)?;
            Some(report::read_summary(&ns3_dir.join("summary.csv"))?)
        } else {
            None
        };
        rows.push(PolicyResult {
            policy: p.name.into(),
            ina_slots: a.ina_slots,
            replay,
            ns3,
        });
    }
    let mut table = report::results_table(&rows)?;
    let path = a.out.join("results.csv");
    report::write_csv(&mut table, &path)?;
    print!("{}", report::format_table(&table));
    eprintln!("wrote {}", path.display());
    if !rows.iter().any(|r| r.ns3.is_some()) && !a.no_ns3 {
        eprintln!(
            "ns-3 not run ({}): pass --ns3 to run it",
            if ns3_installed {
                "the trace moves more than 256 MiB over the network"
            } else {
                "not installed"
            }
        );
    }
    Ok(())
}

/// Payload bytes the trace puts on the network, from the replayer's summary.
#[cfg(feature = "tables")]
fn net_bytes(s: &ina3d::fct::Summary) -> u64 {
    s.tp_bytes + s.pp_bytes + s.dp_bytes + s.emb_bytes
}

#[cfg(feature = "tables")]
fn path_arg(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// Runs one stage as `ina3d ARGS`, printing the command first; its own output (progress,
/// summaries, errors) goes straight to the terminal.
#[cfg(feature = "tables")]
fn stage(exe: &std::path::Path, policy: &str, args: &[String]) -> anyhow::Result<()> {
    use anyhow::Context;
    eprintln!("[{policy}] $ ina3d {}", args.join(" "));
    let status = std::process::Command::new(exe)
        .args(args)
        .status()
        .with_context(|| format!("policy `{policy}`: starting `ina3d {}`", args[0]))?;
    if !status.success() {
        anyhow::bail!(
            "policy `{policy}`: `ina3d {}` failed ({status}); its message is above",
            args.join(" ")
        );
    }
    Ok(())
}

/// Run `ina3d run` (this build has no tables).
#[cfg(not(feature = "tables"))]
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d run` needs the `tables` feature (polars); rebuild with default features")
}
