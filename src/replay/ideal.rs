//! The `ideal` rate model ([`super::RateModel::Ideal`]): max-min fair rates reached at
//! once, the solver's answer alone (`solver.rs`). It caps nothing and has no events of
//! its own.

use super::rates::{RateControl, Started};
use super::solver::Net;

/// Max-min fair rates, nothing else.
pub(super) struct Ideal;

impl RateControl for Ideal {
    fn started(&mut self, _: &mut Net, _: u32, _: Started) {}

    fn finished(&mut self, _: &mut Net, _: u32) {}

    fn removing(&mut self, _: &mut Net, _: u32) {}

    fn settle(&mut self, net: &mut Net) -> Option<u64> {
        net.resolve(None);
        None
    }

    fn tick(&mut self, _: &mut Net, _: Option<u64>) {}
}
