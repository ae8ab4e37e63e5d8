//! The replayer's three feeds — a list of records, the generator straight into the record
//! table (`ina3d replay --from`), and a trace file read one record at a time (`ina3d
//! replay FILE`) — replay one job identically: same rows, summary, links and slots.

use ina3d::lower::Algorithm;
use ina3d::pipeline::{
    generate_trace, replay_file, replay_job, replay_records, replay_table, Job, JobSpec,
    ParallelSizes,
};
use ina3d::replay::{RateModel, RecordTable, ReplayResult};
use ina3d::trace::InaConfig;

fn tiny(ina: &str) -> JobSpec {
    JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "fat-tree:k=4,gpus-per-server=2".into(),
        ina: InaConfig {
            mode: ina.parse().unwrap(),
            ..Default::default()
        },
        ..JobSpec::default()
    }
}

/// Everything but the trace's name and the wall time.
fn same(a: &ReplayResult, b: &ReplayResult, what: &str) {
    assert_eq!(a.rows(), b.rows(), "{what}: rows");
    let (mut x, mut y) = (a.summary.clone(), b.summary.clone());
    (x.trace, y.trace, x.wall_time_ns, y.wall_time_ns) = (String::new(), String::new(), 0, 0);
    assert_eq!(x, y, "{what}: summary");
    assert_eq!(a.channels, b.channels, "{what}: links");
    assert_eq!(a.slots, b.slots, "{what}: switch slots");
    assert_eq!(
        (a.events, a.resolves, a.ina_fallbacks),
        (b.events, b.resolves, b.ina_fallbacks),
        "{what}: event counts"
    );
}

#[test]
fn records_the_generator_feed_and_a_trace_file_replay_identically() {
    for ina in ["off", "hierarchical"] {
        let spec = tiny(ina);
        let job = Job::prepare(&spec).unwrap();
        let opts = spec.trace_options().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("trace.csv.gz");
        let t = generate_trace(&job, &opts, Some(&file), true, &mut |_| {}).unwrap();
        assert!(t.records.len() > 100, "a trace with something to replay");
        let from_records = replay_records(
            &t.records,
            &t.header,
            &job.topology,
            spec.seed,
            "t",
            false,
            Default::default(),
        )
        .unwrap();
        let (_, from_generator) = replay_job(
            &spec,
            false,
            ina3d::replay::RateModel::default(),
            &mut |_| {},
        )
        .unwrap();
        let from_file = replay_file(&file, &Default::default()).unwrap().result;
        same(&from_records, &from_generator, &format!("{ina}: generator"));
        same(&from_records, &from_file, &format!("{ina}: file"));
        assert_eq!(from_records.rows().len(), t.records.len());
        if ina != "off" {
            assert!(!from_records.slots.is_empty(), "INA took slots");
        }
    }
}

#[test]
fn a_trace_file_with_a_dangling_dep_is_refused_naming_the_record_and_the_dep() {
    let spec = tiny("off");
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let mut t = generate_trace(&job, &opts, None, true, &mut |_| {}).unwrap();
    let last = t.records.len() - 1;
    let id = t.records[last].id;
    t.records[last].deps.push(ina3d::units::FlowId(1 << 40));
    let e = replay_records(
        &t.records,
        &t.header,
        &job.topology,
        0,
        "t",
        false,
        Default::default(),
    )
    .unwrap_err();
    let msg = ina3d::pipeline::error_chain(&e);
    assert!(
        msg.contains(&format!(
            "record {id}: dep {} is not in the trace",
            1u64 << 40
        )),
        "{msg}"
    );
}

#[test]
fn a_replay_past_its_deadline_stops_with_out_of_time_and_one_without_a_deadline_ends() {
    let spec = tiny("off");
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let t = generate_trace(&job, &opts, None, true, &mut |_| {}).unwrap();
    let table = || ina3d::replay::RecordTable::from_records(&t.records).unwrap();
    let run = |deadline| {
        ina3d::pipeline::replay_table_until(
            table(),
            &t.header,
            &job.topology,
            spec.seed,
            "t",
            false,
            ina3d::replay::RateModel::Dcqcn,
            deadline,
        )
    };
    let whole = run(None).unwrap();
    assert_eq!(whole.summary.records as usize, t.records.len());
    match run(Some(std::time::Instant::now())) {
        Err(ina3d::pipeline::PipelineError::Replay { source, .. }) => match *source {
            ina3d::replay::ReplayError::OutOfTime { done, total, .. } => {
                assert_eq!(total, t.records.len());
                assert!(done < total, "stopped before the end: {done} of {total}");
            }
            e => panic!("not out of time: {e}"),
        },
        other => panic!("not stopped: {:?}", other.map(|r| r.summary)),
    }
}

/// The tiny model on 64 GPUs (DP 16: rings of 16 members, 30 steps for an all-reduce).
fn wide(collective: Algorithm, channels: u32) -> JobSpec {
    JobSpec {
        topology: "fat-tree:k=8,gpus-per-server=2".into(),
        sizes: ParallelSizes {
            dp: Some(16),
            ..Default::default()
        },
        set: vec!["global_batch_size=32".into()],
        collective,
        nccl_channels: Some(channels),
        ..tiny("off")
    }
}

#[test]
fn ring_steps_held_as_blocks_replay_exactly_as_one_row_per_record() {
    for (collective, channels) in [
        (Algorithm::Ring, 1),
        (Algorithm::Ring, 2),
        (Algorithm::Hierarchical, 1),
    ] {
        let spec = wide(collective, channels);
        let job = Job::prepare(&spec).unwrap();
        let opts = spec.trace_options().unwrap();
        let t = generate_trace(&job, &opts, None, true, &mut |_| {}).unwrap();
        let blocks = RecordTable::from_records(&t.records).unwrap();
        let rows = RecordTable::new_explicit()
            .with_records(&t.records)
            .unwrap();
        let what = format!("{collective:?}, {channels} channels");
        assert!(
            blocks.in_blocks() > t.records.len() / 2,
            "{what}: most of the records are ring steps ({} of {} in blocks)",
            blocks.in_blocks(),
            t.records.len()
        );
        assert_eq!(rows.in_blocks(), 0);
        for model in [RateModel::Ideal, RateModel::Dcqcn] {
            let replay = |table| {
                replay_table(
                    table,
                    &t.header,
                    &job.topology,
                    spec.seed,
                    "t",
                    false,
                    model,
                )
                .unwrap()
            };
            let (a, b) = (replay(blocks.clone()), replay(rows.clone()));
            same(&a, &b, &format!("{what}, {model:?}"));
        }
    }
}
