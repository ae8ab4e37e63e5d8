//! Placement: which of the fabric's GPUs each job's ranks live on.
//!
//! The fabric's GPUs are numbered in its own rank order (`Topology::gpus`, index `g`),
//! grouped into servers of `gpus_per_server` (the NVLink domain; 1 without NVLink). A job
//! of `W` ranks takes `ceil(W / gpus_per_server)` whole servers, so every NVLink domain
//! stays inside one job and a job's TP groups keep their NVLink exactly as they would
//! alone. Job rank `r` then lives on GPU `server[r / gps] · gps + r mod gps`: the job's
//! own topology is the fabric with `gpus` remapped ([`job_topology`]), and the generator,
//! the planner and the replayer all read rank → node through it.
//!
//! Order of assignment: explicit placements first (they name their GPUs), then the other
//! jobs in file order, except that every `interleaved` job is placed when the first of them
//! is reached, all together, taking free servers in turn (job a, job b, …, a, b, …) until
//! each has its count. `contiguous` takes the lowest free servers; `random` a seeded
//! shuffle of the free servers (SplitMix64 of the seed; the same seed, the same servers).

use crate::topology::Topology;
use crate::units::NodeId;

/// Where a job's ranks go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The lowest free servers, in order.
    Contiguous,
    /// Free servers taken in turn with the other interleaved jobs.
    Interleaved,
    /// A seeded random choice of free servers, in a random order.
    Random(u64),
    /// The fabric GPU index (its rank order) of each job rank.
    Explicit(Vec<u32>),
}

impl Placement {
    /// A `placement` value: `"contiguous"`, `"interleaved"`, `"random"` (with
    /// `placement-seed`, default 0) or `"random:SEED"`, or a list of fabric GPU indices.
    pub fn parse(v: &toml::Value, seed: Option<i64>) -> Result<Placement, String> {
        let seed_ok = |s: i64| u64::try_from(s).map_err(|_| format!("seed {s} is negative"));
        let p = match v {
            toml::Value::String(s) => match s.trim() {
                "contiguous" => Placement::Contiguous,
                "interleaved" => Placement::Interleaved,
                "random" => Placement::Random(seed_ok(seed.unwrap_or(0))?),
                other => match other.strip_prefix("random:") {
                    Some(n) => Placement::Random(
                        n.trim()
                            .parse()
                            .map_err(|_| format!("`{other}`: random:SEED takes an integer"))?,
                    ),
                    None => {
                        return Err(format!(
                        "`{other}`: expected contiguous, interleaved, random (or random:SEED) or a list of GPU indices"
                    ))
                    }
                },
            },
            toml::Value::Array(a) => Placement::Explicit(
                a.iter()
                    .map(|x| {
                        x.as_integer()
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(|| {
                                format!("`{x}` is not a GPU index (the fabric's rank order, from 0)")
                            })
                    })
                    .collect::<Result<_, _>>()?,
            ),
            other => return Err(format!("`{other}`: expected a placement name or a list")),
        };
        if seed.is_some() && !matches!(p, Placement::Random(_)) {
            return Err("a placement seed goes with placement = \"random\"".into());
        }
        Ok(p)
    }

    /// The name written to `jobs.csv`.
    pub fn label(&self) -> String {
        match self {
            Placement::Contiguous => "contiguous".into(),
            Placement::Interleaved => "interleaved".into(),
            Placement::Random(s) => format!("random:{s}"),
            Placement::Explicit(_) => "explicit".into(),
        }
    }
}

/// Why the jobs cannot be placed: the job at fault (index) and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct PlaceError {
    /// The job.
    pub job: usize,
    /// What is wrong.
    pub msg: String,
}

/// The fabric GPU index of every rank of every job (`worlds[j]` ranks for job `j`).
pub fn place(
    topo: &Topology,
    worlds: &[u32],
    placements: &[&Placement],
) -> Result<Vec<Vec<u32>>, PlaceError> {
    let gps = if topo.nvlink_rate.is_some() {
        topo.gpus_per_server.max(1)
    } else {
        1
    };
    let gpus = topo.gpus.len() as u32;
    let servers = gpus / gps;
    let need = |j: usize| worlds[j].div_ceil(gps);
    // owner of each server (a job index), and of each GPU for explicit placements
    let mut owner: Vec<Option<usize>> = vec![None; servers as usize];
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); worlds.len()];
    for (j, p) in placements.iter().enumerate() {
        if let Placement::Explicit(list) = p {
            out[j] = explicit(j, list, worlds[j], gps, gpus, &mut owner)?;
        }
    }
    let mut total = 0u64;
    for (j, &world) in worlds.iter().enumerate() {
        total += u64::from(need(j));
        if total > u64::from(servers) {
            return Err(PlaceError {
                job: j,
                msg: format!(
                    "needs {} GPUs ({} servers of {gps}); with the jobs before it the cluster needs {} of the fabric's {servers} servers ({gpus} GPUs)",
                    world,
                    need(j),
                    total
                ),
            });
        }
    }
    let free = |owner: &[Option<usize>]| -> Vec<u32> {
        (0..servers)
            .filter(|&s| owner[s as usize].is_none())
            .collect()
    };
    let mut interleaved_done = false;
    for j in 0..worlds.len() {
        let chosen: Vec<u32> = match placements[j] {
            Placement::Explicit(_) => continue,
            Placement::Interleaved if interleaved_done => continue,
            Placement::Interleaved => {
                interleaved_done = true;
                let group: Vec<usize> = (j..worlds.len())
                    .filter(|&k| *placements[k] == Placement::Interleaved)
                    .collect();
                let mut lists: Vec<Vec<u32>> = vec![Vec::new(); group.len()];
                let mut f = free(&owner).into_iter();
                'turns: loop {
                    let mut took = false;
                    for (k, &job) in group.iter().enumerate() {
                        if lists[k].len() < need(job) as usize {
                            let Some(s) = f.next() else { break 'turns };
                            lists[k].push(s);
                            took = true;
                        }
                    }
                    if !took {
                        break;
                    }
                }
                for (k, &job) in group.iter().enumerate() {
                    for &s in &lists[k] {
                        owner[s as usize] = Some(job);
                    }
                    out[job] = gpus_of(&lists[k], worlds[job], gps);
                }
                continue;
            }
            Placement::Contiguous => free(&owner).into_iter().take(need(j) as usize).collect(),
            Placement::Random(seed) => {
                let mut f = free(&owner);
                shuffle(&mut f, *seed);
                f.truncate(need(j) as usize);
                f
            }
        };
        for &s in &chosen {
            owner[s as usize] = Some(j);
        }
        out[j] = gpus_of(&chosen, worlds[j], gps);
    }
    Ok(out)
}

/// The GPUs of `world` ranks on `servers` (in rank order).
fn gpus_of(servers: &[u32], world: u32, gps: u32) -> Vec<u32> {
    (0..world)
        .map(|r| servers[(r / gps) as usize] * gps + r % gps)
        .collect()
}

/// An explicit placement, checked: one index per rank, each on the fabric, no GPU or
/// server of another job, and (with NVLink) each group of `gps` consecutive ranks on one
/// server of its own, so the job's NVLink domains are real servers.
fn explicit(
    j: usize,
    list: &[u32],
    world: u32,
    gps: u32,
    gpus: u32,
    owner: &mut [Option<usize>],
) -> Result<Vec<u32>, PlaceError> {
    let err = |msg: String| PlaceError { job: j, msg };
    if list.len() as u64 != u64::from(world) {
        return Err(err(format!(
            "lists {} GPUs for a job of {world} ranks (one fabric GPU index per rank)",
            list.len()
        )));
    }
    if let Some(g) = list.iter().find(|&&g| g >= gpus) {
        return Err(err(format!(
            "GPU {g} is not on the fabric (GPUs 0 to {})",
            gpus - 1
        )));
    }
    let mut seen = list.to_vec();
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(format!("GPU {} is listed twice", w[0])));
    }
    for (c, chunk) in list.chunks(gps as usize).enumerate() {
        let first = c * gps as usize;
        let s = chunk[0] / gps;
        if let Some(r) = chunk.iter().position(|&g| g / gps != s) {
            return Err(err(format!(
                "rank {} is on server {} but rank {first} on server {s}: ranks {first}..{} share an NVLink server (gpus-per-server {gps})",
                first + r,
                chunk[r] / gps,
                first + gps as usize - 1
            )));
        }
        match owner[s as usize] {
            Some(o) if o == j => {
                return Err(err(format!(
                    "server {s} holds ranks of two of its NVLink groups (rank {first} and an earlier one)"
                )))
            }
            Some(o) => {
                return Err(err(format!(
                    "GPU {} (rank {first}, server {s}) is already placed for job[{o}]: placements overlap",
                    chunk[0]
                )))
            }
            None => owner[s as usize] = Some(j),
        }
    }
    Ok(list.to_vec())
}

/// A seeded Fisher–Yates shuffle (SplitMix64 stream).
fn shuffle(v: &mut [u32], seed: u64) {
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let k = ((u128::from(next()) * (i as u128 + 1)) >> 64) as usize;
        v.swap(i, k);
    }
}

/// The job's view of the fabric: the same nodes and links, with rank `r` on the node of
/// fabric GPU `gpus[r]`.
pub fn job_topology(fabric: &Topology, gpus: &[u32]) -> Topology {
    Topology {
        gpus: gpus.iter().map(|&g| fabric.gpus[g as usize]).collect(),
        ..fabric.clone()
    }
}

/// The hosts (nodes) of a placement, ascending.
pub fn hosts(fabric: &Topology, gpus: &[u32]) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = gpus.iter().map(|&g| fabric.gpus[g as usize]).collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric() -> Topology {
        Topology::from_spec("fat-tree:k=4,gpus-per-server=2").unwrap()
    }

    #[test]
    fn interleaved_jobs_take_servers_in_turn() {
        let t = fabric();
        let i = Placement::Interleaved;
        let p = place(&t, &[8, 8], &[&i, &i]).unwrap();
        assert_eq!(p[0], vec![0, 1, 4, 5, 8, 9, 12, 13]);
        assert_eq!(p[1], vec![2, 3, 6, 7, 10, 11, 14, 15]);
    }

    #[test]
    fn contiguous_jobs_take_the_lowest_free_servers_after_explicit_ones() {
        let t = fabric();
        let e = Placement::Explicit(vec![0, 1, 2, 3]);
        let c = Placement::Contiguous;
        let p = place(&t, &[4, 4], &[&c, &e]).unwrap();
        assert_eq!(p[1], vec![0, 1, 2, 3]);
        assert_eq!(p[0], vec![4, 5, 6, 7]);
    }

    #[test]
    fn a_random_placement_depends_only_on_its_seed() {
        let t = fabric();
        let (a, b) = (Placement::Random(7), Placement::Random(8));
        let p7 = place(&t, &[8], &[&a]).unwrap();
        assert_eq!(p7, place(&t, &[8], &[&a]).unwrap());
        assert_ne!(p7, place(&t, &[8], &[&b]).unwrap());
        // whole servers: GPU pairs (2s, 2s+1)
        assert!(p7[0].chunks(2).all(|c| c[0] % 2 == 0 && c[1] == c[0] + 1));
    }

    #[test]
    fn too_many_gpus_overlaps_and_split_servers_are_refused_naming_the_job() {
        let t = fabric();
        let c = Placement::Contiguous;
        let e = place(&t, &[8, 16], &[&c, &c]).unwrap_err();
        assert_eq!(e.job, 1);
        assert!(e.msg.contains("16 GPUs"), "{}", e.msg);
        let (x, y) = (
            Placement::Explicit(vec![0, 1, 2, 3]),
            Placement::Explicit(vec![4, 5, 2, 3]),
        );
        let e = place(&t, &[4, 4], &[&x, &y]).unwrap_err();
        assert_eq!(e.job, 1);
        assert!(
            e.msg.contains("overlap") && e.msg.contains("job[0]"),
            "{}",
            e.msg
        );
        let split = Placement::Explicit(vec![0, 2, 4, 6]);
        let e = place(&t, &[4], &[&split]).unwrap_err();
        assert!(e.msg.contains("NVLink"), "{}", e.msg);
    }
}
