//! An HPCC-family `fct.txt` mapped back onto trace records (`ns3::external`): the
//! replayer's own fct.txt, emitted with the replayer's start times, must map back to every
//! network record with the replayer's FCTs; rows the emitted flows do not explain and
//! records with a missing row are named.

use ina3d::formats::hpcc_fct;
use ina3d::ns3::external::match_hpcc_fct;
use ina3d::ns3::{EmitOptions, StartSource};
use ina3d::pipeline::{emit_ns3, generate_trace, replay_records, Job, JobSpec};
use ina3d::record::Mode;

#[test]
fn a_replay_s_fct_txt_maps_back_to_every_network_record_and_gaps_are_named() {
    let spec = JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=2".into(),
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let t = generate_trace(&job, &opts, None, true, &mut |_| {}).unwrap();
    let r = replay_records(&t.records, &t.header, &job.topology, 0, "t", false).unwrap();
    let d = tempfile::tempdir().unwrap();
    let fct_csv = d.path().join("fct.csv");
    ina3d::formats::fct_csv::write(&fct_csv, r.row_iter()).unwrap();
    let emit = d.path().join("emit");
    let eo = EmitOptions {
        start: StartSource::Replay(fct_csv),
        ..EmitOptions::default()
    };
    let ina = ina3d::ns3::ina_model(&t.header).unwrap();
    emit_ns3(&t.records, &ina, &job.topology, &eo, &emit, "t").unwrap();
    let fct_txt = emit.join("fct.txt");
    hpcc_fct::write(&fct_txt, r.row_iter(), hpcc_fct::Flavor::Hpcc).unwrap();

    let ext = match_hpcc_fct(&emit, &fct_txt).unwrap();
    let rows = r.rows();
    let net: Vec<_> = rows.iter().filter(|x| x.mode == Mode::Net).collect();
    assert_eq!(ext.network_records, net.len());
    assert_eq!(ext.rows.len(), net.len());
    assert!(ext.unmatched_lines.is_empty() && ext.incomplete_records.is_empty());
    let mut got = ext.rows.clone();
    got.sort_by_key(|x| x.flow_id);
    for (a, b) in got.iter().zip(&net) {
        assert_eq!(
            (a.flow_id, a.start_ns, a.fct_ns),
            (b.flow_id, b.start_ns, b.fct_ns)
        );
    }

    // drop the first row and add one no emitted flow explains
    let text = std::fs::read_to_string(&fct_txt).unwrap();
    let mut lines: Vec<&str> = text.lines().skip(1).collect();
    lines.push("0b000001 0b000401 10005 100 7 1 2 3");
    std::fs::write(&fct_txt, lines.join("\n") + "\n").unwrap();
    let ext = match_hpcc_fct(&emit, &fct_txt).unwrap();
    assert_eq!(ext.rows.len(), net.len() - 1);
    assert_eq!(ext.incomplete_records.len(), 1);
    assert_eq!(ext.unmatched_lines.len(), 1);
    assert!(
        ext.unmatched_lines[0].contains("7 B"),
        "{:?}",
        ext.unmatched_lines
    );
}
