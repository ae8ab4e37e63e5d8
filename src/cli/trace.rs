//! `ina3d trace`: Megatron job + topology → per-flow DAG trace file.

use super::job::JobArgs;
use anyhow::{bail, Context};
use ina3d::pipeline::{generate_trace, trace_report, Job};
use ina3d::trace::{parse_classes, InaMode};
use std::path::PathBuf;

/// Arguments of `ina3d trace`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ina3d::topology::Topology::SPEC_HELP)]
pub struct Args {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// Topology: a builder spec (`fat-tree:k=8`, `leaf-spine:leaves=4,spines=2,hosts-per-leaf=8`, …) or an HPCC topology.txt.
    #[arg(long)]
    pub topology: String,
    /// Output trace (CSV; gzip when the name ends in .gz).
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// In-network aggregation: off, switchml, hierarchical, atp, rina.
    #[arg(long, value_parser = super::keyword::<InaMode>(InaMode::NAMES), default_value = "off")]
    pub ina: InaMode,
    /// Traffic classes allowed to aggregate, in priority order.
    #[arg(long, default_value = "tp,dp,emb")]
    pub ina_classes: String,
    /// ECMP / tie-break seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Lower this plan (`ina3d plan`): each group's host algorithm or tree and its slot
    /// reservations (INA mode and slot policy `planned`). The plan must have been made
    /// for the same job, topology (by content), seed, channels and INA switch options; what
    /// differs is named. A plan whose reservations exceed a switch's pool among groups that
    /// may run together, with trees for groups that never reach the network, or roots not
    /// above their members is refused, naming the group, the switch and the constraint.
    #[arg(long, value_name = "PLAN.json", conflicts_with_all = ["ina", "ina_policy"])]
    pub plan: Option<PathBuf>,
    /// Instead of a training iteration, one collective per size, as nccl-tests runs them:
    /// every group of `--group` at once, each size after the previous one has finished.
    /// The collectives are lowered as the model's are (`--collective`, `--ina*`, NCCL
    /// channels, NVLink); the input only gives the layout (`--tp/--pp/--dp`). `ina3d
    /// replay` and `ina3d ns3 run` then print algbw/busbw per size and write `bench.csv`.
    #[arg(long, value_name = "COLLECTIVE", value_parser = super::keyword::<ina3d::schedule::CollKind>(ina3d::schedule::CollKind::NAMES), requires = "sizes", conflicts_with = "plan")]
    pub collective_bench: Option<ina3d::schedule::CollKind>,
    /// Bench sizes: `A..B` (powers of two from A to B, e.g. 1MiB..1GiB) or a list
    /// (`1MiB,8MiB,64MiB`); units B, KiB, MiB, GiB (= K, M, G: powers of 1024).
    #[arg(long, value_name = "SIZES", requires = "collective_bench")]
    pub sizes: Option<String>,
    /// Bench groups: tp (every TP group), dp (every DP group), all (one group of every rank).
    #[arg(long, value_parser = super::keyword::<ina3d::trace::BenchGroup>(ina3d::trace::BenchGroup::NAMES), default_value = "all", requires = "collective_bench")]
    pub group: ina3d::trace::BenchGroup,
    /// The job's options (shared with `ina3d run`).
    #[command(flatten)]
    pub job: JobArgs,
}

/// Run `ina3d trace`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let classes = parse_classes(&a.ina_classes)
        .map_err(anyhow::Error::msg)
        .context("--ina-classes")?;
    let mode = if a.plan.is_some() {
        InaMode::Planned
    } else if a.ina == InaMode::Planned {
        bail!("--ina planned lowers a plan: give --plan PLAN.json (made by `ina3d plan`)");
    } else {
        a.ina
    };
    let spec = a.job.spec(&a.input, &a.topology, mode, classes, a.seed)?;
    let job = Job::prepare(&spec)?;
    for w in &job.warnings {
        eprintln!("warning: {w}");
    }
    // the back-ends route every host pair: a fabric they cannot route (a host cut off, or
    // joined only by NVLink) is refused here, not written as a trace `replay` refuses
    ina3d::topology::Routing::new(&job.topology, a.seed)
        .with_context(|| format!("--topology `{}`: routing on it", a.topology))?;
    let mut opts = spec.trace_options()?;
    if let Some(kind) = a.collective_bench {
        let sizes = ina3d::trace::parse_sizes(a.sizes.as_deref().unwrap_or_default())
            .map_err(anyhow::Error::msg)?;
        let bench = ina3d::trace::CollectiveBench {
            kind,
            sizes,
            group: a.group,
        };
        let t = ina3d::pipeline::generate_bench_trace(&job, &opts, &bench, Some(&a.output), false)?;
        print!("{}", trace_report(&job, &opts, &t));
        if let Some(b) = ina3d::trace::BenchSpec::from_header(&t.header)? {
            println!(
                "  collective bench: {} over {} {} group(s) of {} GPUs, {} sizes",
                b.kind,
                b.groups,
                b.group,
                b.group_size,
                b.sizes.len()
            );
        }
        return Ok(());
    }
    if let Some(p) = &a.plan {
        let plan = ina3d::formats::plan_json::read(p)?;
        let header = ina3d::trace::header(&job.cfg, &job.workload, &job.topology, &opts);
        ina3d::trace::planned::check_plan_job(&plan, &header)
            .and_then(|()| match plan.fixed_policy {
                // a fixed policy's answer lowers that policy, not the groups
                Some(_) => Ok(()),
                None => {
                    ina3d::trace::planned::check_plan(&plan, &job.workload, &job.topology, &opts)
                }
            })
            .with_context(|| format!("--plan {}", p.display()))?;
        opts = ina3d::trace::planned::lowering_options(&opts, &plan);
    }
    let bar = ina3d::progress::spinner("generating trace");
    let t = generate_trace(&job, &opts, Some(&a.output), false, &mut |n| {
        bar.set_message(format!("{n} records"));
    });
    bar.finish_and_clear();
    print!("{}", trace_report(&job, &opts, &t?));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        trace: Args,
    }

    #[test]
    fn trace_without_flags_takes_the_library_s_job_defaults() {
        let c = Cmd::try_parse_from(["trace", "in.log", "--topology", "t", "-o", "x"]).unwrap();
        let a = &c.trace;
        let spec = a
            .job
            .spec(
                &a.input,
                &a.topology,
                a.ina,
                parse_classes(&a.ina_classes).unwrap(),
                a.seed,
            )
            .unwrap();
        let want = ina3d::pipeline::JobSpec {
            input: "in.log".into(),
            topology: "t".into(),
            ..Default::default()
        };
        assert_eq!(spec, want);
        // and the generator's own defaults, the slot policy resolved from the mode as
        // `JobSpec::trace_options` resolves it
        let mut lib = ina3d::trace::TraceOptions::default();
        lib.ina.policy = Some(lib.ina.policy());
        assert_eq!(spec.trace_options().unwrap(), lib);
    }
}
