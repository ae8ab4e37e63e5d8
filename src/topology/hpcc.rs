//! Reading and writing HPCC `topology.txt` and SimAI topology files (DESIGN §9).

use super::{Topology, TopologyError, TopologyWarning};
use std::path::Path;

impl Topology {
    /// Read an HPCC or SimAI topology file.
    pub fn read_file(path: &Path) -> Result<(Topology, Vec<TopologyWarning>), TopologyError> {
        Err(TopologyError::Parse {
            path: path.display().to_string(),
            line: 1,
            field: "file".into(),
            msg: "topology file reading lands in the next commit".into(),
        })
    }
}
