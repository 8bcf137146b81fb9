//! The steps [`crate::app::App::open`] assembles a tenant in, each in its own room: the
//! workspace and its quota ([`workspace`]), the PII vault ([`vault`]), the sandbox from the
//! configuration's groups ([`sandbox`]), the image's tree on the host ([`image_tree`]), the
//! tenant's sandbox user ([`tenant_user`]), the engine's limits proved at start
//! ([`engine_limits`]), the server's package cache with its installer ([`packages`]), the
//! tenant's egress ([`egress`]) and what its sandbox may hold in clear ([`flow`]).

pub(crate) mod egress;
pub mod engine_limits;
pub(crate) mod flow;
pub(crate) mod image_tree;
pub(crate) mod packages;
pub(crate) mod sandbox;
pub(crate) mod tenant_user;
pub(crate) mod vault;
pub(crate) mod workspace;
