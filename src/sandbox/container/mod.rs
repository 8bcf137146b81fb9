//! One sandbox container as the engine is asked for it: the hardened definition ([`spec`]),
//! the OCI runtime it runs under ([`runtime`], gVisor's runsc included), what a rootless
//! engine changes ([`rootless`]), the package installer's container ([`installer`])
//! the seccomp profile as a file ([`seccomp_file`]) and each container's own directory for a
//! session's state ([`state_dir`]).

pub mod egress_dir;
pub mod installer;
pub mod rootless;
pub mod runtime;
pub mod seccomp_file;
pub mod spec;
pub mod state_dir;
