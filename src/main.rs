//! `ina3d` command line: a thin layer over the library's stage entries.

use clap::{CommandFactory, FromArgMatches, Subcommand};
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
#[derive(clap::Parser, Debug)]
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
    clean_up_on_signals();
    let cli = parse_args();
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
            // input echoed in the message is shown escaped (control bytes, BOM, NUL)
            let msg = ina3d::pipeline::error_chain(&*e);
            eprintln!("error: {}", ina3d::formats::escape_message(&msg));
            ExitCode::from(1)
        }
        Err(e) => {
            // each cause once: a message that already ends with its cause's text (a file
            // error naming the path and what the OS said) is not followed by it again
            // input echoed in the message is shown escaped (control bytes, BOM, NUL)
            let msg = ina3d::pipeline::error_chain(&*e);
            eprintln!("error: {}", ina3d::formats::escape_message(&msg));
            // 2 = the input (files, flags) is wrong, as clap does for usage errors.
            ExitCode::from(2)
        }
    }
}

/// The command line with every subcommand's examples under its help.
fn command() -> clap::Command {
    cli::examples::attach(Cli::command())
}

fn parse_args() -> Cli {
    let m = command().get_matches();
    Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit())
}

/// SIGINT, SIGTERM and SIGHUP end the command cleanly: a thread waits for them (they are
/// blocked everywhere else, and inherited blocked by children, so the ns-3 glue starts
/// through `ina3d::ns3::child`, which unblocks them), kills the glue runs still going,
/// removes every temporary the command has open and exits with 128 + the signal.
/// Directories being written keep their incompleteness marker, so no reader takes the
/// half set for a result (`ina3d::formats::atomic`).
fn clean_up_on_signals() {
    #[cfg(unix)]
    // SAFETY: called once at start-up, before any other thread exists, with a signal set
    // built by sigemptyset/sigaddset; sigwait only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return; // keep the default actions
        }
        let waiter = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || loop {
                let mut sig: libc::c_int = 0;
                if libc::sigwait(&set, &mut sig) != 0 {
                    continue;
                }
                // first, so no glue writes on while its directory is cleaned up
                ina3d::ns3::child::kill_all();
                let removed = ina3d::formats::atomic::remove_temporaries();
                eprintln!(
                    "\ninterrupted (signal {sig}): {removed} unfinished file(s) removed; \
                     directories being written stay marked incomplete ({})",
                    ina3d::formats::atomic::INCOMPLETE
                );
                std::process::exit(128 + sig);
            });
        if waiter.is_err() {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_in_the_help_parses() {
        let lists = cli::examples::argument_lists();
        assert!(lists.len() >= 30, "{} examples", lists.len());
        for (path, text) in cli::examples::EXAMPLES {
            for l in text.lines() {
                let n = l.chars().count();
                assert!(
                    n <= cli::examples::MAX_LINE,
                    "`{path}` example of {n} chars: {l}"
                );
            }
        }
        for (path, args) in lists {
            if let Err(e) = command().try_get_matches_from(&args) {
                panic!(
                    "example under `{path}` does not parse: {}\n{e}",
                    args.join(" ")
                );
            }
        }
    }

    #[test]
    fn every_subcommand_has_two_or_more_examples() {
        fn leaves(c: &clap::Command, prefix: &str, out: &mut Vec<String>) {
            for s in c.get_subcommands() {
                let path = format!("{prefix}{}", s.get_name());
                if s.has_subcommands() && !s.is_args_conflicts_with_subcommands_set() {
                    leaves(s, &format!("{path} "), out);
                } else if s.get_name() != "help" {
                    out.push(path);
                }
            }
        }
        let mut paths = Vec::new();
        leaves(&Cli::command(), "", &mut paths);
        let lists = cli::examples::argument_lists();
        for p in paths {
            let n = lists.iter().filter(|(q, _)| *q == p).count();
            assert!(n >= 2, "`ina3d {p}` has {n} examples");
        }
    }

    #[test]
    fn every_flag_and_argument_is_described() {
        fn check(c: &clap::Command, path: &str) {
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(
                    !help.trim().is_empty(),
                    "`ina3d {path}`: `{id}` has no description"
                );
            }
            for s in c.get_subcommands() {
                check(s, format!("{path} {}", s.get_name()).trim_start());
            }
        }
        check(&command(), "");
    }
}
