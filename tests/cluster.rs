//! `ina3d cluster`: several jobs on one fabric. Each expectation is derived by hand from
//! the job and the fabric, or read from what the replayer wrote (`switches.csv`), never
//! from the code that placed, merged or reserved.

use ina3d::cluster::{self, Cluster, ClusterOutcome, ClusterPolicy, ClusterSpec};
use ina3d::formats::cluster_csv;
use ina3d::pipeline::Reporter;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Quiet;
impl Reporter for Quiet {
    fn line(&mut self, _: &str) {}
}

/// Runs the cluster file `text` into `out` in-process.
fn run(text: &str, out: &Path) -> ClusterOutcome {
    let path = out.join("cluster.toml");
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(&path, text).unwrap();
    let spec = ClusterSpec::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let c = Cluster::prepare(spec).unwrap_or_else(|e| panic!("{e}"));
    cluster::run(&c, out, &mut Quiet)
        .unwrap_or_else(|e| panic!("{}", ina3d::pipeline::error_chain(&e)))
}

/// The tiny job (traces/example/tiny.toml) as data parallelism only, over `dp` GPUs.
fn dp_only(name: &str, dp: u32, placement: &str) -> String {
    format!(
        "[[job]]\nname = \"{name}\"\ninput = \"{}/traces/example/tiny.toml\"\n\
         set = {{ tensor_model_parallel_size = 1, pipeline_model_parallel_size = 1, data_parallel_size = {dp}, global_batch_size = {dp} }}\n\
         placement = {placement}\n",
        root().display()
    )
}

fn ina3d(args: &[&str]) -> (Option<i32>, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn two_identical_jobs_on_disjoint_halves_of_a_fat_tree_run_exactly_as_fast_as_alone() {
    // A k=4 fat-tree without NVLink: 16 hosts, 4 per pod. Contiguous placement gives job a
    // pods 0-1 and job b pods 2-3. Every link a job uses is inside its pods or between
    // its pods' aggregation switches and the cores, so the two jobs share no link (the
    // fabric is non-blocking and the halves are disjoint); with 8,192 slots per switch
    // (the cores are the only switches both reach) no aggregation waits either. By hand:
    // each job's shared iteration is its alone iteration, to the nanosecond, under every
    // policy that does not re-plan.
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "topology = \"fat-tree:k=4,nvlink=off\"\nina-slots = 8192\npolicies = [\"ring\", \"split\", \"atp\"]\n{}{}",
        dp_only("a", 8, "\"contiguous\""),
        dp_only("b", 8, "\"contiguous\"")
    );
    let o = run(&text, d.path());
    assert_eq!(o.jobs.len(), 6);
    for j in &o.jobs {
        assert_eq!(
            j.shared.iteration_time_ns, j.alone.iteration_time_ns,
            "{} under {}",
            j.job, j.policy
        );
        assert_eq!(j.slowdown(), 1.0);
        assert!(j.shared.exposed_dp_ns > 0, "the job communicates");
    }
    // and the INA policies did aggregate (the comparison is not between two rings)
    let atp = o
        .jobs
        .iter()
        .find(|j| j.policy == ClusterPolicy::Atp)
        .unwrap();
    assert!(atp.slots.peak > 0);
    // the printed tables: a line per job and policy, then one per policy, each under the
    // 100 columns of a terminal, the slowdown of 1 on every job's line
    let text = cluster::table::format_table(&o);
    let (jobs, policies) = text.split_once("\n\n").unwrap();
    assert_eq!(jobs.lines().count(), 1 + 6, "{text}");
    assert_eq!(policies.lines().count(), 1 + 3, "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(
        jobs.lines().skip(1).all(|l| l.contains(" 1.000 ")),
        "{text}"
    );
}

#[test]
fn two_jobs_sharing_one_oversubscribed_uplink_take_the_hand_derived_slowdown() {
    // Two leaves of 4 hosts under one spine, 4:1 oversubscribed: each leaf's uplink
    // carries 100 Gb/s, as much as one NIC. Each job is the tiny model as DP2 with one
    // rank under each leaf (a: hosts 0 and 4, b: hosts 1 and 5), so both jobs' gradient
    // all-reduces cross the same uplinks in the same direction at the same time.
    // The derivation is max-min fair sharing: the ideal rate model. (Under RoCE the
    // shared steps are longer: ns-3 2.826 ms, the DCQCN replay 2.984 ms against this
    // derivation's 2.390 ms; docs/cluster.md, "Against ns-3".)
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "topology = \"leaf-spine:leaves=2,spines=1,hosts-per-leaf=4,oversub=4,nvlink=off\"\nrate-model = \"ideal\"\npolicies = [\"ring\"]\n{}{}",
        dp_only("a", 2, "[0, 4]"),
        dp_only("b", 2, "[1, 5]")
    );
    let o = run(&text, d.path());
    // By hand. Parameters of the tiny model (hidden 256, 4 layers, vocab 1024, sequence
    // 256): 4·(12·256² + 13·256) + 1024·256 + 256·256 + 2·256 = 3,487,232; fp32
    // gradients: S = 13,948,928 B per rank. The ring all-reduce of 2 ranks is 2 steps of
    // S/2, each split over NCCL's 2 channels: every step, each rank sends 2 transfers of
    // S/4 = 3,487,232 B, with 48 B of header per 1,000 B packet (3,488 packets):
    let params: u64 = 4 * (12 * 256 * 256 + 13 * 256) + 1024 * 256 + 256 * 256 + 2 * 256;
    assert_eq!(params, 3_487_232);
    let record = params * 4 / 4;
    let wire = record + record.div_ceil(1000) * 48;
    // Alone, a rank's 2 transfers share its 100 Gb/s NIC (and the uplink): 50 Gb/s each.
    // Shared, the uplink carries both jobs' 4 transfers: 25 Gb/s each. A step ends when
    // its last byte has crossed the 4 links of 1 µs (host, leaf, spine, leaf, host).
    let step = |gbps: u64| (wire * 8).div_ceil(gbps) + 4 * 1000;
    let (alone_dp, shared_dp) = (2 * step(50), 2 * step(25));
    for j in &o.jobs {
        // the iteration is the rank's compute, then the all-reduce
        let compute = j.alone.compute_ns;
        assert_eq!(
            j.alone.iteration_time_ns,
            compute + alone_dp,
            "{} alone",
            j.job
        );
        assert_eq!(
            j.shared.iteration_time_ns,
            compute + shared_dp,
            "{} shared",
            j.job
        );
        let by_hand = (compute + shared_dp) as f64 / (compute + alone_dp) as f64;
        assert!((j.slowdown() - by_hand).abs() < 1e-12, "{}", j.slowdown());
        assert!(
            shared_dp > alone_dp * 19 / 10 && j.slowdown() > 1.1,
            "the DP phase doubles and slows the iteration: {}",
            j.slowdown()
        );
    }
}

/// The issue's example (two tiny jobs interleaved on a k=4 fat-tree with 2-GPU servers)
/// with every policy and a pool of `slots`.
fn example(slots: u32) -> String {
    let t = root().join("traces/example/tiny.toml");
    format!(
        "topology = \"fat-tree:k=4,gpus-per-server=2\"\nina-slots = {slots}\n\
         policies = [\"ring\", \"split\", \"atp\", \"plan\", \"plan-fair\"]\nplan-time-limit = 5\n\
         [[job]]\nname = \"a\"\ninput = \"{t}\"\nplacement = \"interleaved\"\n\
         [[job]]\nname = \"b\"\ninput = \"{t}\"\nset = {{ hidden_size = 512 }}\nplacement = \"interleaved\"\n",
        t = t.display()
    )
}

#[test]
fn in_every_policy_no_switch_ever_holds_more_slots_than_its_pool() {
    // 256 slots per switch, the window of one stream: the jobs' trees meet on the upper
    // switches and must share. Read from what the replayer wrote (switches.csv: the slots
    // each switch physically held over time) and from each job's own holding intervals.
    let d = tempfile::tempdir().unwrap();
    let pool = 256u64;
    let o = run(&example(pool as u32), d.path());
    for p in [
        ClusterPolicy::Ring,
        ClusterPolicy::Split,
        ClusterPolicy::Atp,
        ClusterPolicy::Plan,
        ClusterPolicy::PlanFair,
    ] {
        let samples = ina3d::formats::switches_csv::read(
            &d.path().join(p.as_str()).join("replay/switches.csv"),
        )
        .unwrap();
        let peak = samples
            .iter()
            .map(|s| s.slots_in_use as u64)
            .max()
            .unwrap_or(0);
        assert!(peak <= pool, "{p}: a switch held {peak} slots of {pool}");
        if p != ClusterPolicy::Ring {
            assert!(peak > 0, "{p} aggregated nothing: the check would be empty");
        }
        for j in o.jobs.iter().filter(|j| j.policy == p) {
            assert!(j.slots.peak <= pool, "{p} {}", j.job);
            if p == ClusterPolicy::Split {
                // the even split: each job a half of every pool
                assert!(
                    j.slots.peak <= pool / 2,
                    "split {}: {}",
                    j.job,
                    j.slots.peak
                );
            }
        }
    }
    // the tables on disk say the same as the outcome
    let rows = cluster_csv::read_jobs(&d.path().join("jobs.csv")).unwrap();
    assert_eq!(rows.len(), 10);
    let cl = cluster_csv::read_cluster(&d.path().join("cluster.csv")).unwrap();
    assert_eq!(cl.len(), 5);
    for c in &cl {
        assert!(
            c.slot_peak <= pool && (0.0..=1.0).contains(&c.jain_fairness),
            "{c:?}"
        );
        assert!(
            c.makespan_ns
                >= rows
                    .iter()
                    .filter(|r| r.policy == c.policy)
                    .map(|r| r.iteration_time_ns)
                    .max()
                    .unwrap()
        );
    }
}

#[test]
fn the_issue_example_runs_as_written_and_twice_gives_the_same_bytes() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("ex.toml");
    std::fs::write(
        &file,
        "topology = \"fat-tree:k=4,gpus-per-server=2\"\nina-slots = 1024\npolicies = [\"ring\", \"atp\", \"plan\"]\n\
         [[job]]\nname = \"a\"\ninput = \"traces/example/tiny.toml\"\nplacement = \"interleaved\"\n\
         [[job]]\nname = \"b\"\ninput = \"traces/example/tiny.toml\"\nset = { hidden_size = 512 }\nplacement = \"interleaved\"\n",
    )
    .unwrap();
    let mut outs = Vec::new();
    for k in 0..2 {
        let out = d.path().join(format!("out{k}"));
        let (code, err) = ina3d(&[
            "cluster",
            file.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{err}");
        outs.push(out);
    }
    for f in ["jobs.csv", "cluster.csv"] {
        let a = std::fs::read(outs[0].join(f)).unwrap();
        assert_eq!(
            a,
            std::fs::read(outs[1].join(f)).unwrap(),
            "{f} differs between runs"
        );
    }
    let rows = cluster_csv::read_jobs(&outs[0].join("jobs.csv")).unwrap();
    assert_eq!(rows.len(), 6);
    // job b (hidden 512) moves 4× job a's gradients: it is the slower one alone
    let it = |job: &str| {
        rows.iter()
            .find(|r| r.job == job && r.policy == "ring")
            .unwrap()
            .alone_iteration_time_ns
    };
    assert!(it("b") > it("a"));
}

/// `ina3d cluster` on `text` (a file in a fresh directory): exit code, stderr, and
/// whether the output directory got anything.
fn refused(text: &str) -> (Option<i32>, String, bool) {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("bad.toml");
    std::fs::write(&file, text).unwrap();
    let out = d.path().join("out");
    let (code, err) = ina3d(&[
        "cluster",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    (code, err, out.exists())
}

#[test]
fn bad_clusters_exit_2_naming_the_job_and_the_field_before_writing_anything() {
    let tiny = "input = \"traces/example/tiny.toml\"";
    // three 8-GPU jobs on 16 GPUs: the third does not fit
    let (code, err, wrote) = refused(&format!(
        "[[job]]\nname = \"a\"\n{tiny}\n[[job]]\nname = \"b\"\n{tiny}\n[[job]]\nname = \"c\"\n{tiny}\n"
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("bad.toml:") && err.contains("job[2] c.") && err.contains("16 GPUs"),
        "{err}"
    );
    assert!(!wrote);
    // one job larger than the fabric
    let (code, err, _) = refused(&format!(
        "[[job]]\nname = \"big\"\n{tiny}\nset = {{ data_parallel_size = 8, global_batch_size = 32 }}\n"
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("job[0] big.placement") && err.contains("32 GPUs"),
        "{err}"
    );
    // overlapping explicit placements
    let (code, err, wrote) = refused(&format!(
        "[[job]]\nname = \"a\"\n{tiny}\nplacement = [0,1,2,3,4,5,6,7]\n[[job]]\nname = \"b\"\n{tiny}\nplacement = [8,9,10,11,12,13,6,7]\n"
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(":8:") && err.contains("job[1] b.placement") && err.contains("overlap"),
        "{err}"
    );
    assert!(!wrote);
    // a job whose input fails, and one whose overrides make it inconsistent
    let (code, err, _) = refused(&format!(
        "[[job]]\nname = \"a\"\n{tiny}\n[[job]]\nname = \"b\"\ninput = \"no/such/job.toml\"\n"
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(":6:") && err.contains("job[1] b.input") && err.contains("no/such/job.toml"),
        "{err}"
    );
    let (code, err, _) = refused(&format!(
        "[[job]]\nname = \"a\"\n{tiny}\nset = {{ tensor_model_parallel_size = 3 }}\n"
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("job[0] a.set"), "{err}");
    // a key the file does not have, a policy that does not exist, two jobs of one name
    for (text, want) in [
        (
            format!("slots = 3\n[[job]]\nname = \"a\"\n{tiny}\n"),
            "unknown field",
        ),
        (
            format!("policies = [\"ring\", \"fast\"]\n[[job]]\nname = \"a\"\n{tiny}\n"),
            "policies",
        ),
        (
            format!("[[job]]\nname = \"a\"\n{tiny}\n[[job]]\nname = \"a\"\n{tiny}\n"),
            "job[1] a.name",
        ),
        (
            format!("[[job]]\nname = \"a\"\n{tiny}\nplacement = \"spread\"\n"),
            "job[0] a.placement",
        ),
    ] {
        let (code, err, wrote) = refused(&text);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(!wrote);
    }
}

#[test]
fn a_sweep_runs_every_point_once_and_tables_them_with_their_axes() {
    let d = tempfile::tempdir().unwrap();
    let text = format!(
        "topology = \"fat-tree:k=4,nvlink=off\"\npolicies = [\"ring\", \"atp\"]\n\
         [sweep]\nina-slots = [256, 8192]\nplacement = [\"contiguous\", \"interleaved\"]\n{}{}",
        dp_only("a", 8, "\"contiguous\""),
        dp_only("b", 8, "\"contiguous\"")
    );
    let path = d.path().join("sweep.toml");
    std::fs::write(&path, &text).unwrap();
    let spec = ClusterSpec::read(&path).unwrap();
    let out = d.path().join("out");
    let o = cluster::run_sweep(&spec, &out, &mut Quiet).unwrap();
    assert_eq!(o.points.len(), 4);
    let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = jobs.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("sweep_ina_slots,sweep_placement,job,policy,"));
    // 4 points × 2 policies × 2 jobs, in product order (slots slowest)
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 16);
    assert!(rows[0].starts_with("256,contiguous,a,ring,"), "{}", rows[0]);
    assert!(
        rows[15].starts_with("8192,interleaved,b,atp,"),
        "{}",
        rows[15]
    );
    // contiguous halves share nothing (see the first test); interleaved ones share links
    for (p, _, c) in &o.points {
        let worst = c.iter().map(|r| r.max_slowdown).fold(0.0, f64::max);
        if p.label.contains("contiguous") {
            assert_eq!(worst, 1.0, "{}", p.label);
        }
    }
    // a second run finds every point done and writes the same tables
    let before = std::fs::read(out.join("cluster.csv")).unwrap();
    let again = cluster::run_sweep(&spec, &out, &mut Quiet).unwrap();
    assert_eq!(again.points.len(), 4);
    assert_eq!(std::fs::read(out.join("cluster.csv")).unwrap(), before);
    assert!(!out.join("points").read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".tmp")));
}

#[test]
fn three_jobs_scattered_on_an_oversubscribed_leaf_spine_replay_under_dcqcn_without_runaway_queues()
{
    // notebooks/cluster.toml's point `ina_slots-256_placement-random-2_mix-a+b+c` under
    // plan-fair (RoCE, so DCQCN): scattered GPUs put several members of one DP tree under
    // one leaf, so the tree crosses that leaf's backlogged uplink more than once. Until
    // 2 Dec 2026 the DCQCN model fed the port's own drain back into the stream's later
    // crossings; the queue grew 3.6× per tick until the clock overflowed (a panic in
    // `make notebooks`). No job may run more than three times slower than alone.
    let t = root().join("traces/example/tiny.toml");
    let text = format!(
        "topology = \"leaf-spine:leaves=4,spines=2,hosts-per-leaf=8,gpus-per-server=2,oversub=2\"\n\
         ina-slots = 256\npolicies = [\"plan-fair\"]\nplan-time-limit = 5\n\
         [[job]]\nname = \"a\"\ninput = \"{t}\"\nplacement = \"random:2\"\n\
         [[job]]\nname = \"b\"\ninput = \"{t}\"\nset = {{ hidden_size = 512 }}\nplacement = \"random:2\"\n\
         [[job]]\nname = \"c\"\ninput = \"{t}\"\nset = {{ data_parallel_size = 4, global_batch_size = 16 }}\nplacement = \"random:2\"\n",
        t = t.display()
    );
    let d = tempfile::tempdir().unwrap();
    let o = run(&text, d.path());
    assert_eq!(o.jobs.len(), 3);
    for j in &o.jobs {
        let (shared, alone) = (j.shared.iteration_time_ns, j.alone.iteration_time_ns);
        assert!(
            shared < 3 * alone,
            "job {}: {shared} ns shared, {alone} ns alone",
            j.job
        );
    }
}
