//! `ina3d export aicb` and `ina3d export chakra`.

use super::job::ModelArgs;
use anyhow::{Context, Result};
use ina3d::formats::aicb;
use ina3d::interop::aicb::from_workload;
use ina3d::pipeline::JobSpec;
use ina3d::schedule;
use std::path::PathBuf;

/// Subcommands of `ina3d export`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// The AICB/SimAI workload (HYBRID_TRANSFORMER_FWD_IN_BCKWD) of a job, from the same
    /// workload model the trace is built from; takes the same model flags as `ina3d trace`.
    Aicb(Box<AicbArgs>),
    /// MLCommons Chakra execution traces (v1.0.0) for ASTRA-sim: one `<prefix>.<rank>.et`
    /// per rank (compute, collective, send and receive nodes with their dependencies and
    /// process groups) and `<prefix>.comm_group.json`, the communicator groups for
    /// ASTRA-sim's --comm-group-configuration; from the same workload model the trace is
    /// built from, with the same model flags as `ina3d trace`.
    Chakra(Box<ChakraArgs>),
}

/// `ina3d export chakra`.
#[derive(clap::Args, Debug)]
pub struct ChakraArgs {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// The model and its compute, as for `ina3d trace`.
    #[command(flatten)]
    pub model: ModelArgs,
    /// File name prefix: ASTRA-sim's --workload-configuration is `DIR/PREFIX`.
    #[arg(long, default_value = "workload")]
    pub prefix: String,
    /// Output directory (created; existing files of the same names are replaced).
    #[arg(short, long)]
    pub out: PathBuf,
}

/// `ina3d export aicb`.
#[derive(clap::Args, Debug)]
pub struct AicbArgs {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// The model and its compute, as for `ina3d trace`.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output file.
    #[arg(short, long)]
    pub out: PathBuf,
}

/// The workload of `input` with the model flags, warnings printed.
fn workload(input: &str, model: &ModelArgs) -> Result<schedule::Workload> {
    let mut spec = JobSpec {
        input: input.to_string(),
        ..JobSpec::default()
    };
    model.apply(&mut spec)?;
    let cfg = spec.config()?;
    for w in &cfg.warnings {
        eprintln!("warning: {w}");
    }
    let opts = spec.trace_options()?;
    schedule::build(&cfg, &opts.schedule).context("building the workload")
}

/// Refuses an export whose programs would not fit in memory (every rank's program is
/// held until written), with the estimate, the limit and how to set another.
fn check_chakra_memory(wl: &schedule::Workload) -> Result<()> {
    use ina3d::replay::budget::{self, MemoryBudget};
    // every rank's program is held until written: nodes × their bytes, before any is built
    let Some(limit) = MemoryBudget::of_process()? else {
        return Ok(());
    };
    let est = ina3d::interop::chakra::estimate(wl)?;
    if est.bytes > limit.limit {
        anyhow::bail!(
            "export chakra would hold about {} nodes over {} ranks, {} in memory (estimated \
             from one rank per pipeline stage), more than the limit of {} ({}); or export \
             a smaller job (--dp, --pp, --set)",
            est.nodes,
            wl.world(),
            budget::size(est.bytes),
            budget::size(limit.limit),
            limit.source,
        );
    }
    Ok(())
}

/// Run `ina3d export`.
pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Chakra(a) => {
            let wl = workload(&a.input, &a.model)?;
            check_chakra_memory(&wl)?;
            let e = ina3d::interop::chakra::from_workload(&wl)?;
            if a.prefix.is_empty() || a.prefix.contains('/') {
                anyhow::bail!(
                    "--prefix `{}`: expected a file name prefix without `/`",
                    a.prefix
                );
            }
            // marked incomplete until the last file is written; a re-run first removes
            // the files an earlier export listed (a larger job's ranks)
            let mut members: Vec<String> = (0..e.ranks.len())
                .map(|r| format!("{}.{r}.et", a.prefix))
                .collect();
            members.push(format!("{}.comm_group.json", a.prefix));
            let set = ina3d::formats::atomic::OutputSet::with_members(
                &a.out,
                "ina3d export chakra",
                members,
                |_| false,
            )?;
            let meta = ina3d::interop::chakra::ChakraExport::metadata();
            let progress = ina3d::progress::bar(
                e.ranks.len() as u64,
                "writing Chakra traces {bar:40} {pos}/{len} ranks",
            );
            let mut nodes = 0;
            for (r, ns) in e.ranks.iter().enumerate() {
                let p = a.out.join(format!("{}.{r}.et", a.prefix));
                ina3d::formats::chakra::write(&p, &meta, ns)?;
                nodes += ns.len();
                progress.inc(1);
            }
            progress.finish_and_clear();
            let groups = a.out.join(format!("{}.comm_group.json", a.prefix));
            ina3d::formats::write_atomic_bytes(&groups, e.comm_group_json().as_bytes())?;
            set.finish()?;
            eprintln!(
                "wrote {} Chakra traces ({nodes} nodes) and {} ({} communicator groups) in {}",
                e.ranks.len(),
                groups.display(),
                e.comm_groups.len(),
                a.out.display()
            );
            Ok(())
        }
        Command::Aicb(a) => {
            let wl = workload(&a.input, &a.model)?;
            let w = from_workload(&wl)?;
            aicb::write(&a.out, &w)?;
            eprintln!(
                "wrote {} ({} rows: {} micro-batches of one stage's layers, embedding and LM head)",
                a.out.display(),
                w.rows.len(),
                wl.microbatches
            );
            Ok(())
        }
    }
}
