//! The collectives of a bench ([`crate::trace::bench`]): every size in turn over every
//! group of the kind asked for, through [`Gen::collective`] like a model's, a barrier
//! after each size.

use super::{Gen, Stream, Tag, TraceError, TraceStats};
use crate::record::{Class, FlowRecord};
use crate::schedule::Workload;
use crate::topology::Topology;
use crate::trace::bench::{BenchGroup, BenchSpec, CollectiveBench};
use crate::trace::TraceOptions;
use crate::units::{FlowId, Nanos, Rank};

/// The groups of `wl`'s layout that run a bench over `group`, in rank order.
pub fn bench_groups(wl: &Workload, group: BenchGroup) -> Vec<Vec<Rank>> {
    match group {
        BenchGroup::Tp => wl.groups.tp_groups.clone(),
        BenchGroup::Dp => wl.groups.dp_groups.clone(),
        BenchGroup::All => vec![(0..wl.world()).map(Rank).collect()],
    }
}

impl CollectiveBench {
    /// The spec of this bench on `wl`'s layout (what the trace header records). An error
    /// when the groups have a single member: there is nothing to measure.
    pub fn spec(&self, wl: &Workload) -> Result<BenchSpec, TraceError> {
        let groups = bench_groups(wl, self.group);
        let n = groups.first().map_or(0, Vec::len) as u32;
        if n < 2 {
            return Err(TraceError::Generate(format!(
                "--group {}: the groups of this layout (TP{} PP{} DP{}) have {n} member(s); a collective needs at least 2",
                self.group,
                wl.tp(),
                wl.pp(),
                wl.dp()
            )));
        }
        Ok(BenchSpec {
            kind: self.kind,
            group: self.group,
            group_size: n,
            groups: groups.len() as u32,
            sizes: self.sizes.clone(),
        })
    }
}

/// Generate the trace of a collective bench on `wl`'s layout: for each size of `spec` (its
/// index is the records' `iteration`), the collective over every group at once, then a
/// barrier (see [`crate::trace::bench`]).
pub fn generate_bench(
    wl: &Workload,
    topo: &Topology,
    opts: &TraceOptions,
    spec: &BenchSpec,
    sink: &mut dyn FnMut(FlowRecord) -> Result<(), TraceError>,
) -> Result<TraceStats, TraceError> {
    if opts.iterations != 1 {
        return Err(TraceError::Generate(
            "--iterations does not apply to a collective bench (each size runs once)".into(),
        ));
    }
    let groups = bench_groups(wl, spec.group);
    let class = match spec.group {
        BenchGroup::Tp => Class::Tp,
        BenchGroup::Dp | BenchGroup::All => Class::Dp,
    };
    let tag = Tag {
        class,
        microbatch: None,
        layer: None,
        stage: None,
    };
    let mut g = Gen::new(wl, topo, opts, sink)?;
    for (k, &size) in spec.sizes.iter().enumerate() {
        g.iteration = k as u32;
        for members in &groups {
            g.collective(spec.kind, size, members, Stream::Main, tag)?;
        }
        g.barrier(wl.world())?;
    }
    Ok(g.finish())
}

impl Gen<'_> {
    /// A zero-length compute record on the first GPU waiting for every rank's last
    /// record; every rank continues after it.
    fn barrier(&mut self, world: u32) -> Result<(), TraceError> {
        let mut deps: Vec<FlowId> = Vec::new();
        for r in 0..world {
            deps.append(&mut self.chain(Stream::Main, Rank(r)).tail);
        }
        deps.sort_unstable();
        deps.dedup();
        let node = self.topo.gpu(Rank(0));
        let tag = Tag {
            class: Class::Compute,
            microbatch: None,
            layer: None,
            stage: None,
        };
        let id = self.compute(node, deps, Nanos(0), tag)?;
        for r in 0..world {
            self.set_tail(Stream::Main, Rank(r), &[id]);
        }
        Ok(())
    }
}
