//! The binary's commands besides `serve`: `doctor` (the engine and host checks, each problem
//! with its fix) and `image` (building the sandbox image and images with the user's packages).

pub mod doctor;
pub mod image;
