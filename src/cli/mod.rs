//! The binary's commands besides `serve`: `doctor` (the engine and host checks, each problem
//! with its fix), `image` (building the sandbox image and images with the user's packages) and
//! `audit` (reading the audit trail).

pub mod audit;
pub mod doctor;
pub mod image;
