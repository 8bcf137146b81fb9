//! The engine: the seam the sandbox reaches it through ([`backend::Backend`] and its error in
//! engine-neutral words, [`EngineError`]), the Docker Engine API behind it ([`docker`], the only code that talks to
//! bollard), the events the sandbox follows ([`events`]), and paths as the engine
//! sees them when the server itself runs in a container ([`paths`]).

pub mod backend;
pub mod docker;
pub mod error;
pub(crate) mod events;
pub mod paths;

pub use backend::Backend;
pub use docker::{Engine, EngineInfo, SwarmNode};
pub use error::EngineError;
