//! `ina3d run`: the main job. From one Megatron input to `results.csv`, one row per INA
//! policy (over one or more ECMP seeds), all in-process through `ina3d::pipeline::run`
//! (which documents the output layout).

use super::job::JobArgs;
use ina3d::pipeline::{
    parse_policies, parse_seeds, Ns3Choice, Reporter, RunSpec, DEFAULT_INPUT, DEFAULT_TOPOLOGY,
};
use ina3d::trace::{InaConfig, InaMode};
use std::io::IsTerminal;
use std::path::PathBuf;

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
    /// INA algorithm of the INA policies (`ina3d trace --ina`).
    #[arg(long, value_parser = super::keyword::<InaMode>(InaMode::NAMES), default_value = "hierarchical", value_name = "ALGO")]
    pub ina: InaMode,
    /// Policies to run, comma-separated, `ring` among them (every speed-up is measured
    /// against it): ring (INA off); ina-dp, ina-tp, ina-tp-dp (those classes aggregate on
    /// --ina trees); plan (the planner's heuristic plan, as `ina3d plan` makes it with solver
    /// heuristic), plan-exact (its integer program, solver ilp); the baselines atp (hierarchical
    /// trees, best-effort slots, host fallback), rina (racks reduce into their ToR, ring
    /// across racks) and sharp (the planner under one tree per switch). Planner policies
    /// plan each seed's routes anew and write DIR/<policy>/plan.json; results.csv shows
    /// their predicted iteration time beside the replayed one.
    #[arg(
        long,
        default_value = "ring,ina-dp,ina-tp,ina-tp-dp,plan,plan-exact,atp,rina,sharp",
        value_name = "LIST"
    )]
    pub policies: String,
    /// Wall-time safety net of each planner policy, seconds (per seed): the plan is bounded
    /// by work, and one stopped by this limit says so (docs/plan.md).
    #[arg(long, default_value_t = ina3d::pipeline::DEFAULT_PLAN_TIME_LIMIT, value_name = "S")]
    pub plan_time_limit: f64,
    /// ECMP seeds, comma-separated: every policy runs once per seed. With more than one,
    /// each seed's outputs go to DIR/seed-<s>/ and results.csv gives per policy the median
    /// over the seeds, the range of iteration time and speed-up, and the seeds.
    #[arg(long, default_value = "0", value_name = "LIST")]
    pub seeds: String,
    /// Also run every policy on ns-3 and compare it with the replayer. Without this flag
    /// ns-3 still runs when it is installed and the trace moves at most 256 MiB over the network.
    #[arg(long, conflicts_with = "no_ns3")]
    pub ns3: bool,
    /// Never run ns-3.
    #[arg(long)]
    pub no_ns3: bool,
    /// Transport of the ns-3 glue: `roce` (UDP queue pairs with DCQCN and ECN-marking
    /// switches, as LLM clusters run and HPCC's and SimAI's ns-3 model) or `tcp` (NewReno
    /// with windows of two bandwidth-delay products).
    #[arg(long, value_parser = super::keyword::<ina3d::ns3::Transport>(ina3d::ns3::Transport::NAMES), default_value = "roce")]
    pub transport: ina3d::ns3::Transport,
    /// TCP connections of the ns-3 glue (under `--transport tcp`): one persistent per
    /// (src, dst) pair, or one per record.
    #[arg(long, value_parser = super::keyword::<ina3d::ns3::TcpConnections>(ina3d::ns3::TcpConnections::NAMES), default_value = "persistent")]
    pub tcp_connections: ina3d::ns3::TcpConnections,
    /// The replayer's rate model: `dcqcn` (rates capped by each queue pair's DCQCN rate,
    /// as the `roce` glue runs them) or `ideal` (max-min fair rates at once, what TCP
    /// approaches). Default: the one `--transport` gives (dcqcn for roce, ideal for tcp).
    /// See `ina3d replay --help`.
    #[arg(long, value_parser = super::keyword::<ina3d::replay::RateModel>(ina3d::replay::RateModel::NAMES))]
    pub rate_model: Option<ina3d::replay::RateModel>,
    /// Keep traces in memory only (no DIR/<policy>/trace.csv.gz).
    #[arg(long)]
    pub no_traces: bool,
    /// Write only each replay's summary, links and switches, not its per-flow fct.csv and
    /// fct.txt (hundreds of MB per replay at thousands of GPUs); ns-3 does not run then.
    #[arg(long, conflicts_with = "ns3")]
    pub no_flows: bool,
    /// Also write each policy's replay as a timeline, DIR/<policy>/timeline.json (with
    /// several seeds DIR/seed-<s>/<policy>/timeline.json): Chrome trace-event JSON of
    /// representative ranks (every stage of the first pipeline, the DP and CP groups of
    /// rank 0), to open in ui.perfetto.dev beside an Nsight Systems profile. `ina3d replay
    /// --timeline` chooses other ranks. See docs/timeline.md.
    #[arg(long)]
    pub timeline: bool,
    /// Output directory.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print every stage's messages (plans, traces, replays, ns-3 runs, comparisons) instead
    /// of one progress bar.
    #[arg(short, long)]
    pub verbose: bool,
    /// The job's options (shared with `ina3d trace`).
    #[command(flatten)]
    pub job: JobArgs,
}

impl Args {
    /// The library's run spec of these flags.
    pub fn spec(&self) -> anyhow::Result<RunSpec> {
        use anyhow::Context;
        Ok(RunSpec {
            job: self.job.spec(
                &self.input,
                &self.topology,
                self.ina,
                InaConfig::default().classes,
                0,
            )?,
            policies: parse_policies(&self.policies)
                .map_err(anyhow::Error::msg)
                .context("--policies")?,
            seeds: parse_seeds(&self.seeds)
                .map_err(anyhow::Error::msg)
                .context("--seeds")?,
            ns3: match (self.ns3, self.no_ns3) {
                (true, _) => Ns3Choice::On,
                (_, true) => Ns3Choice::Off,
                _ => Ns3Choice::Auto,
            },
            transport: self.transport,
            tcp_connections: self.tcp_connections,
            rate_model: self.rate_model,
            traces: !self.no_traces,
            flows: !self.no_flows,
            timeline: self.timeline,
            plan_time_limit: self.plan_time_limit,
        })
    }
}

/// What `ina3d run` shows on stderr: warnings always; one progress bar over the policies
/// and seeds when stderr is a terminal; every stage message (and the stages' own bars)
/// with `-v`.
pub struct Stderr {
    verbose: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Stderr {
    /// A reporter printing stage messages only when `verbose`.
    pub fn new(verbose: bool) -> Self {
        Stderr { verbose, bar: None }
    }

    fn print(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            None => eprintln!("{text}"),
        }
    }
}

impl Reporter for Stderr {
    fn line(&mut self, text: &str) {
        if self.verbose {
            self.print(text);
        }
    }
    fn warn(&mut self, text: &str) {
        self.print(&format!("warning: {text}"));
    }
    fn step(&mut self, done: usize, total: usize, what: &str) {
        if self.verbose || !std::io::stderr().is_terminal() {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let b = ina3d::progress::bar(
                total as u64,
                "{bar:30} {pos}/{len} policy runs ({elapsed}) {msg}",
            );
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            b
        });
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
        if done == total {
            bar.finish_and_clear();
        }
    }
    fn bars(&self) -> bool {
        self.verbose && std::io::stderr().is_terminal()
    }
}

/// Run `ina3d run`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let spec = a.spec()?;
    let out = ina3d::pipeline::run(&spec, &a.out, &a.out, &mut Stderr::new(a.verbose))?;
    print!("{}", ina3d::report::text::summary(&out.table));
    eprintln!(
        "wrote {} and its picture {}",
        out.results.display(),
        out.picture.display()
    );
    if let Some(why) = out.ns3_note {
        eprintln!("ns-3 not run ({why}): pass --ns3 to run it");
    }
    if out.ns3_ran && !a.no_traces {
        // one packet-level run is one sample of a contended fabric: point at the ensemble
        eprintln!(
            "replay vs ns-3 above is one packet-level run per policy; the error over runs with \
             sub-packet jitter: `ina3d validate --trace` on a policy's trace.csv.gz under {} \
             (docs/model.md#validation-ensemble)",
            a.out.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: Args,
    }

    #[test]
    fn run_without_flags_is_the_library_s_default_run() {
        let c = Cmd::try_parse_from(["run", "-o", "x"]).unwrap();
        assert_eq!(c.run.spec().unwrap(), RunSpec::default());
    }
}
