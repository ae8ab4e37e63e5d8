//! The options of one replay.

use super::error::ReplayError;
use super::rates::RateModel;
use crate::trace::InaConfig;
use crate::units::Bytes;

/// Options of one replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOptions {
    /// Packet payload for the header overhead (`size + ceil(size/payload)·48`).
    pub payload: Bytes,
    /// Header bytes per packet.
    pub header: Bytes,
    /// INA switches.
    pub ina: InaConfig,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Trace name written into the summary.
    pub trace_name: String,
    /// How transfers sharing links are rated ([`RateModel`]).
    pub rate_model: RateModel,
    /// DCQCN's parameters, for [`RateModel::Dcqcn`].
    pub dcqcn: crate::netmodel::DcqcnParams,
    /// Give up (with [`ReplayError::OutOfTime`]) once this wall-clock instant passes: the
    /// planner's repair loop replays candidates within its time limit. `None`: no limit.
    pub deadline: Option<std::time::Instant>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            payload: crate::record::NET_PACKET_PAYLOAD,
            header: crate::record::PACKET_HEADER,
            ina: InaConfig::default(),
            progress: false,
            trace_name: String::new(),
            rate_model: RateModel::default(),
            dcqcn: crate::netmodel::DcqcnParams::default(),
            deadline: None,
        }
    }
}

impl ReplayOptions {
    /// Options with the INA switch model of a trace header
    /// ([`InaConfig::from_header`]). Host transfers keep the network packet payload
    /// ([`crate::record::NET_PACKET_PAYLOAD`]); only INA units use the slot payload.
    pub fn from_header(h: &crate::trace::TraceHeader) -> Result<ReplayOptions, ReplayError> {
        let ina = InaConfig::from_header(h).map_err(|e| match e {
            crate::trace::TraceError::Metadata { key, msg } => ReplayError::Header { key, msg },
            other => ReplayError::Header {
                key: "ina".into(),
                msg: other.to_string(),
            },
        })?;
        Ok(ReplayOptions {
            ina,
            ..ReplayOptions::default()
        })
    }
}
