//! `image build`: the sandbox image of a profile from the embedded `images/python` (on the
//! pinned base, or the offline base), and with a requirements file an image with the user's
//! packages on top of it.

use std::path::PathBuf;

use crate::config::ImageProfile;
use crate::sandbox::image::ImageError;
use crate::sandbox::image::derived::RequirementsError;
use crate::sandbox::image::{self, derived};
use crate::sandbox::{Engine, EngineError};

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

/// What `image build` was asked for (its flags).
#[derive(Debug, clap::Args)]
pub struct Build {
    /// The profile: data (numpy, pandas, matplotlib, ...) or minimal (standard library).
    #[arg(long, env = "CEM_IMAGE_PROFILE", value_enum, default_value_t = ImageProfile::Data)]
    pub profile: ImageProfile,
    /// Base image to build on instead of the pinned python:3.13-slim-trixie digest.
    #[arg(long, env = "CEM_BASE_IMAGE")]
    pub base: Option<String>,
    /// Rebuild even when the image exists.
    #[arg(long)]
    pub force: bool,
    /// A pip requirements file of pinned packages (NAME==VERSION) to install, binary wheels
    /// only, into an image derived from the profile's (or --from) image.
    #[arg(long)]
    pub requirements: Option<PathBuf>,
    /// With --requirements: install from the .whl files of this directory only, without
    /// network.
    #[arg(long, requires = "requirements")]
    pub wheels: Option<PathBuf>,
    /// With --requirements: the sandbox image to add the packages to [default: the
    /// profile's image, built when missing].
    #[arg(long, requires = "requirements")]
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
