//! Containers removed after their run: used ones, when the engine is idle ([`removal`]), and
//! those of servers that are gone, at start ([`reaper`]).

pub(crate) mod reaper;
pub mod removal;
