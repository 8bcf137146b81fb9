//! One sandbox container as the engine is asked for it: the hardened definition ([`spec`]),
//! the OCI runtime it runs under ([`runtime`], gVisor's runsc included), what a rootless
//! engine changes ([`rootless`]), the package installer's container ([`installer`])
//! and the seccomp profile as a file ([`seccomp_file`]).

pub mod installer;
pub mod rootless;
pub mod runtime;
pub mod seccomp_file;
pub mod spec;
