//! `image build`: the sandbox image of a profile from the embedded `images/python` (on the
//! pinned base, or the offline base), and with a requirements file an image with the user's
//! packages on top of it.

use std::path::PathBuf;

use crate::config::ImageProfile;
use crate::sandbox::derived::RequirementsError;
use crate::sandbox::image::ImageError;
use crate::sandbox::{Engine, EngineError, derived, image};

/// Why `image build` built nothing (or not all it was asked for).
#[derive(Debug, thiserror::Error)]
pub enum ImageCommandError {
    #[error(transparent)]
    Requirements(#[from] RequirementsError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Image(#[from] ImageError),
}

/// What `image build` was asked for.
pub struct Build {
    pub profile: ImageProfile,
    /// Base image instead of the pinned python:3.13-slim-trixie digest.
    pub base: Option<String>,
    /// Rebuild even when the image exists.
    pub force: bool,
    /// A pip requirements file of pinned packages to add.
    pub requirements: Option<PathBuf>,
    /// With `requirements`: install from this directory's wheels only.
    pub wheels: Option<PathBuf>,
    /// With `requirements`: the image to add the packages to.
    pub from: Option<String>,
}

/// Builds what `build` asks for, reporting progress on stderr; returns the tag to run.
pub async fn build(build: Build) -> Result<String, ImageCommandError> {
    // Checked before anything is built: a bad line fails at once.
    let packages = build
        .requirements
        .map(|file| derived::Packages::read(&file, build.wheels.as_deref()))
        .transpose()?;
    let engine = Engine::connect().await?;
    let tag = match build.from {
        Some(from) => from,
        None => {
            let tag = image::default_tag(build.profile);
            let id = match image::image_id(&engine, &tag).await? {
                Some(id) if !build.force => {
                    eprintln!("{tag} is already built");
                    id
                }
                _ => image::build(&engine, &tag, build.base.as_deref(), build.profile).await?,
            };
            eprintln!("built {tag} ({id})");
            tag
        }
    };
    Ok(match packages {
        None => tag,
        Some(packages) => {
            let user = derived::build(&engine, &tag, &packages).await?;
            eprintln!("built {user}: run it with `code-execution-mcp serve --image {user}`");
            user
        }
    })
}
