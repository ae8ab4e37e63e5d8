//! Collective benches through the stages: generating one (the same lowering as a model's
//! collectives), and the algbw/busbw table of a run of one, written as `bench.csv` beside
//! the run's `fct.csv` by the replayer and by `ina3d ns3 run`.

use super::{GeneratedTrace, Job, PipelineError};
use crate::fct::bench::{bench_rows, BenchLabels, BenchRow};
use crate::fct::FctRow;
use crate::formats::{bench_csv, fct_csv, glue_trace_txt, read_text};
use crate::record::FlowRecord;
use crate::trace::{self, BenchSpec, CollectiveBench, TraceHeader, TraceOptions};
use std::path::{Path, PathBuf};

/// The file an ns-3 emit directory holds for a bench: a trace with the bench's header and
/// no records, so `ina3d ns3 run` knows the sizes and the group.
pub const BENCH_HEADER_FILE: &str = "bench_header.csv";

/// The results of a bench run, per size.
pub const BENCH_CSV: &str = "bench.csv";

/// Generates the trace of `bench` on `job`'s layout (its groups; the model's compute is
/// not used) with `opts`, into `file` and/or memory, like [`super::generate_trace`].
pub fn generate_bench_trace(
    job: &Job,
    opts: &TraceOptions,
    bench: &CollectiveBench,
    file: Option<&Path>,
    keep: bool,
) -> Result<GeneratedTrace, PipelineError> {
    let what = || file.map_or("the bench trace".into(), |p| format!("`{}`", p.display()));
    let gen_err = |source| PipelineError::Generate {
        what: what(),
        source: Box::new(source),
    };
    let spec = bench.spec(&job.workload).map_err(gen_err)?;
    let mut header = trace::header(&job.cfg, &job.workload, &job.topology, opts);
    spec.write_header(&mut header);
    let mut writer = file
        .map(|p| trace::TraceWriter::create(p, &header))
        .transpose()?;
    let mut records = Vec::new();
    let stats = trace::generate_bench(&job.workload, &job.topology, opts, &spec, &mut |r| {
        if let Some(w) = writer.as_mut() {
            w.write(&r)?;
        }
        if keep {
            records.push(r);
        }
        Ok(())
    })
    .map_err(gen_err)?;
    let path = writer.map(trace::TraceWriter::finish).transpose()?;
    Ok(GeneratedTrace {
        header,
        stats,
        records,
        path,
    })
}

/// The bench a trace header describes, if it marks one.
pub fn bench_spec(header: &TraceHeader, trace: &Path) -> Result<Option<BenchSpec>, PipelineError> {
    BenchSpec::from_header(header).map_err(|source| PipelineError::Generate {
        what: format!("the bench of {}", trace.display()),
        source: Box::new(source),
    })
}

/// algbw/busbw per size of a run of the bench `spec` (its records and rows), written to
/// `dir/bench.csv`.
pub fn write_bench(
    dir: &Path,
    spec: &BenchSpec,
    records: &[FlowRecord],
    rows: &[FctRow],
) -> Result<Vec<BenchRow>, PipelineError> {
    let labels = BenchLabels {
        collective: spec.kind.to_string(),
        group: spec.group.to_string(),
        group_size: spec.group_size,
        busbw_factor: spec.busbw_factor(),
    };
    let out =
        bench_rows(&labels, &spec.sizes, records, rows).map_err(|e| PipelineError::Bench {
            what: format!("the bench run in {}", dir.display()),
            source: Box::new(e),
        })?;
    bench_csv::write(&dir.join(BENCH_CSV), &out)?;
    Ok(out)
}

/// Records the bench `spec` in an ns-3 emit directory ([`BENCH_HEADER_FILE`]).
pub fn emit_bench_header(dir: &Path, spec: &BenchSpec) -> Result<PathBuf, PipelineError> {
    let mut h = TraceHeader::new();
    spec.write_header(&mut h);
    let p = dir.join(BENCH_HEADER_FILE);
    trace::write(&p, &h, &[])?;
    Ok(p)
}

/// After `ina3d ns3 run` on `dir`: when the directory was emitted from a bench, its
/// algbw/busbw per size from the glue's `fct.csv` and the emitted `trace.txt`, written
/// to `dir/bench.csv`; `None` for other traces.
pub fn ns3_bench(dir: &Path) -> Result<Option<Vec<BenchRow>>, PipelineError> {
    let hp = dir.join(BENCH_HEADER_FILE);
    if !hp.exists() {
        return Ok(None);
    }
    let h = trace::read(&hp).map_err(|source| PipelineError::ReadTrace {
        path: hp.clone(),
        source: Box::new(source),
    })?;
    let Some(spec) = bench_spec(&h.header, &hp)? else {
        return Err(PipelineError::Option {
            option: hp.display().to_string(),
            msg: format!(
                "does not mark a bench (no `{}` key)",
                trace::bench::BENCH_HEADER_KEY
            ),
        });
    };
    let tp = dir.join("trace.txt");
    let text = read_text(&tp)?;
    let (records, _) = glue_trace_txt::parse(&tp, &text)?;
    let rows = fct_csv::read(&dir.join("fct.csv"))?;
    write_bench(dir, &spec, &records, &rows).map(Some)
}
