//! `ina3d` command line: a thin layer over the library's stage entries.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cli;

/// Printed after the command list: the pipeline in the order a new user runs it.
const TOUR: &str = "\
Typical session (each stage reads the previous one's file):
  ina3d parse traces/example/megatron.log             # what the job is (add --json)
  ina3d trace traces/example/megatron.log --topology fat-tree:k=4,gpus-per-server=2 \\
        --ina hierarchical --ina-classes dp -o t.csv.gz    # the flow DAG of one iteration
  ina3d inspect t.csv.gz                              # bytes per class, groups, warm-up
  ina3d replay t.csv.gz -o out/replay                 # native simulator, seconds
  ina3d ns3 emit t.csv.gz -o out/ns3 && ina3d ns3 run out/ns3   # packet-level ns-3
  ina3d compare --replay out/replay --ns3 out/ns3 -o out/cmp
  ina3d run                                           # all of it on the bundled example
  ina3d sweep grid.toml -o out/sweep                  # a grid of runs (--slurm: a job array)
  ina3d cluster cluster.toml -o out/cluster          # several jobs sharing one fabric

Exit status: 0 on success, 2 on bad input or a failed stage (the message names the
file, line and field); `sweep` exits 1 when some cells failed or did not run.";

/// From a Megatron-LM job to the per-flow traffic of one 3D-parallel iteration, simulated
/// with and without in-network aggregation (INA), natively and on ns-3.
#[derive(Parser, Debug)]
#[command(name = "ina3d", version, about, long_about, propagate_version = true, after_help = TOUR)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Read Megatron logs, launch scripts, config files or presets into one training config.
    Parse(cli::parse::Args),
    /// Build the per-flow DAG trace of one iteration on a cluster.
    Trace(Box<cli::trace::Args>),
    /// Plan INA: per aggregation group, host algorithm or tree, and slots per switch.
    Plan(Box<cli::plan::Args>),
    /// Summarise a trace: flows and bytes per class, groups, pipeline warm-up.
    Inspect(cli::inspect::Args),
    /// ns-3 back-end: emit HPCC/SimAI inputs, run the glue, ingest outputs.
    #[command(subcommand)]
    Ns3(cli::ns3::Command),
    /// Export workloads for other simulators.
    #[command(subcommand)]
    Export(cli::export::Command),
    /// Replay a trace on the native flow-level simulator.
    Replay(Box<cli::replay::Args>),
    /// Compare a replay with an ns-3 run of the same trace.
    Compare(cli::compare::Args),
    /// The main job: parse, trace, replay each INA policy, (ns-3), compare, results table.
    Run(Box<cli::run::Args>),
    /// A grid of runs (models, layouts, topologies, slots, seeds, …), locally or on Slurm.
    Sweep(cli::sweep::Args),
    /// Several jobs on one fabric: shared links and slot pools, per-job slowdowns.
    Cluster(cli::cluster::Args),
    /// The validation suite: replayer against ns-3 on 8–128-GPU contended fabrics.
    Validate(cli::validate::Args),
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse(a) => cli::parse::run(a),
        Command::Trace(a) => cli::trace::run(*a),
        Command::Plan(a) => cli::plan::run(*a),
        Command::Inspect(a) => cli::inspect::run(a),
        Command::Ns3(c) => cli::ns3::run(c),
        Command::Export(c) => cli::export::run(c),
        Command::Replay(a) => cli::replay::run(*a),
        Command::Compare(a) => cli::compare::run(a),
        Command::Run(a) => cli::run::run(*a),
        Command::Sweep(a) => cli::sweep::run(a),
        Command::Cluster(a) => cli::cluster::run(a),
        Command::Validate(a) => cli::validate::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<cli::sweep::Incomplete>() => {
            // 1 = the input was fine but some sweep cells failed or did not run.
            eprintln!("error: {}", ina3d::pipeline::error_chain(&*e));
            ExitCode::from(1)
        }
        Err(e) => {
            // each cause once: a message that already ends with its cause's text (a file
            // error naming the path and what the OS said) is not followed by it again
            eprintln!("error: {}", ina3d::pipeline::error_chain(&*e));
            // 2 = the input (files, flags) is wrong, as clap does for usage errors.
            ExitCode::from(2)
        }
    }
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`ina3d parse … | head`) is an
/// error every `println!` turns into a panic. A command-line tool should instead end
/// quietly when its reader goes away, as `cat` does: restore the default action.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called once at start-up, before any thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
