//! The workspace's disk quota (default 1 GiB).
//!
//! # Why it is built this way
//!
//! Sandbox code writes to the workspace through a bind mount, at kernel speed, outside anything
//! the server sees. The only limit that holds during an execution is one the kernel enforces, and
//! the simplest such limit that needs no filesystem feature on the host (no XFS project quotas,
//! no user quotas, which would also count the developer's own files) is a filesystem of the
//! quota's size: when the server runs as root and `mkfs.ext4` and `mount` exist, [`ensure`] backs
//! the workspace with a sparse ext4 image stored *beside* it at `<workspace>.quota.ext4`,
//! loop-mounted on the workspace directory with `nosuid,nodev,noexec`. Code that writes past the
//! quota gets `ENOSPC` inside the container; the image never grows past its size, so the host disk
//! is unaffected. The image lives outside the workspace, so the sandbox can never touch the raw
//! filesystem the host kernel mounts.
//!
//! The mount persists after the server exits; on the next start [`ensure`] finds the workspace
//! already a mount point (read from `/proc/self/mountinfo`) and reuses it. After a reboot the
//! directory is empty again and the existing image is mounted again, grown with `resize2fs` if a
//! larger quota is configured (never shrunk: a smaller quota keeps the larger image and says so).
//!
//! # Soft mode, honestly
//!
//! Without root, without the tools, when the mount fails (e.g. no `CAP_SYS_ADMIN` in a
//! container), or when the workspace already holds files and is not a mount point (mounting over
//! them would hide them), [`ensure`] returns [`QuotaMode::Soft`] with the reason and the fix. In
//! soft mode the server measures [`super::Workspace::usage`] and refuses new executions and tool
//! writes while usage is at or over the quota. That bounds the overshoot to what one execution
//! (or the executions running concurrently) writes before it ends: a single execution can still
//! fill the host disk. The usage walk is itself bounded, so a workspace with more than a million
//! entries or deeper than 128 levels is under-counted. Only the loop mount is a real limit.
//!
//! Two deployment limits, both reported as soft mode or left to an explicit unmount: the mount is
//! made in the server's mount namespace, so a server in a private one (systemd `PrivateMounts`,
//! `ProtectSystem`, ...) gets soft mode, because the Docker daemon would not see the mount; and a
//! larger quota configured while the image is still mounted takes effect at the next mount
//! (after [`unmount`] or a reboot), since the image is only grown while unmounted.
//!
//! Order at start-up: `ensure`, then [`super::Workspace::open`] (so the root fd refers to the
//! mounted filesystem), then `prepare_for_sandbox`. Set [`super::WorkspaceLimits::soft_quota`] to
//! `!mode.kernel_enforced(quota)`.

use std::ffi::OsString;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Default quota (1 GiB).
pub const DEFAULT_QUOTA_BYTES: u64 = super::DEFAULT_QUOTA_BYTES;
/// Smallest quota `ensure` accepts: below this ext4's own metadata dominates.
pub const MIN_QUOTA_BYTES: u64 = 16 * 1024 * 1024;
/// Suffix of the image file stored beside the workspace directory.
pub const IMAGE_SUFFIX: &str = ".quota.ext4";
const MOUNT_OPTIONS: &str = "loop,nosuid,nodev,noexec";

/// How the quota is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMode {
    /// The workspace is a loop-mounted ext4 image of `size_bytes`; the kernel enforces it.
    LoopMount {
        image: PathBuf,
        size_bytes: u64,
        /// Set when the image was grown, or kept at a size other than the configured quota.
        note: Option<String>,
    },
    /// The workspace was already a mount point (ours from an earlier run, or the operator's).
    AlreadyMounted {
        source: String,
        fstype: String,
        /// Size of the mounted filesystem (`f_blocks * f_frsize`).
        size_bytes: u64,
    },
    /// No kernel limit: the server refuses executions and writes once usage reaches the quota.
    Soft { reason: String },
}

impl QuotaMode {
    /// A short name for stats: `"loop_mount"` (our image, mounted now or by an earlier run),
    /// `"mounted"` (some other filesystem mounted on the workspace) or `"soft"`.
    pub fn kind(&self) -> &'static str {
        match self {
            QuotaMode::LoopMount { .. } => "loop_mount",
            QuotaMode::AlreadyMounted { source, .. } if source.starts_with("/dev/loop") => {
                "loop_mount"
            }
            QuotaMode::AlreadyMounted { .. } => "mounted",
            QuotaMode::Soft { .. } => "soft",
        }
    }

    /// Whether the kernel bounds the workspace at `quota_bytes` or less. A mount point that was
    /// already there counts only when its filesystem is no larger than the quota; otherwise the
    /// caller should enforce the soft quota as well.
    pub fn kernel_enforced(&self, quota_bytes: u64) -> bool {
        match self {
            QuotaMode::LoopMount { size_bytes, .. } => *size_bytes <= quota_bytes,
            QuotaMode::AlreadyMounted { size_bytes, .. } => *size_bytes <= quota_bytes,
            QuotaMode::Soft { .. } => false,
        }
    }
}

/// Errors that stop the quota from being set up at all (configuration or I/O problems).
/// Anything that merely prevents the loop mount becomes [`QuotaMode::Soft`] instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuotaError {
    #[error("disk quota of {quota_bytes} bytes is too small: configure at least {min} bytes (16 MiB)", min = MIN_QUOTA_BYTES)]
    TooSmall { quota_bytes: u64 },
    #[error("workspace path {} exists but is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("quota image {} is not a regular file: remove it or choose another workspace", path.display())]
    BadImage { path: PathBuf },
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> QuotaError {
    let context = context.into();
    move |source| QuotaError::Io { context, source }
}

/// Where the image for `root` lives: `<root>.quota.ext4`, beside the directory.
pub fn image_path(root: &Path) -> PathBuf {
    let mut s: OsString = root.as_os_str().to_owned();
    s.push(IMAGE_SUFFIX);
    PathBuf::from(s)
}

/// Makes sure the workspace at `root` is bounded at `quota_bytes`, loop-mounting an image when
/// possible. See the module docs for the cases.
pub fn ensure(root: &Path, quota_bytes: u64) -> Result<QuotaMode, QuotaError> {
    if quota_bytes < MIN_QUOTA_BYTES {
        return Err(QuotaError::TooSmall { quota_bytes });
    }
    let exists = is_dir_or_missing(root)?;
    if exists && let Some(mounted) = already_mounted(&canonical(root)?)? {
        return Ok(mounted);
    }
    let quota = super::HumanBytes(quota_bytes);
    if !rustix::process::geteuid().is_root() {
        return Ok(soft(format!(
            "the server does not run as root, so it cannot loop-mount a {quota} image on the workspace"
        )));
    }
    if let Some(ours) = private_mount_namespace() {
        return Ok(soft(format!(
            "the server runs in a private mount namespace ({ours}, not init's: a container, or \
             systemd's PrivateMounts/ProtectSystem/PrivateTmp), so Docker would not see a {quota} \
             image mounted here and containers would write to the directory underneath; run the \
             server on the host, in its mount namespace, to get a hard quota"
        )));
    }
    let Some(tools) = Tools::find() else {
        return Ok(soft(format!(
            "mkfs.ext4, mount or umount is missing (install e2fsprogs and mount), so the {quota} \
             image cannot be created"
        )));
    };
    if exists && !is_empty_dir(root)? {
        let canon = canonical(root)?;
        let image = image_path(&canon);
        return Ok(soft(format!(
            "workspace {ws} already holds files and is not a mount point, and mounting the {quota} \
             image over it would hide them; to get a hard quota, stop the server, move the files out \
             (`mv {ws} {ws}.old && mkdir {ws}`), start the server (it creates and mounts {img}), then \
             move them back in",
            ws = canon.display(),
            img = image.display()
        )));
    }
    if !exists {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(root)
            .map_err(io_err(format!(
                "cannot create workspace {}",
                root.display()
            )))?;
    }
    let canon = canonical(root)?;
    let meta = fs::metadata(&canon).map_err(io_err(format!("cannot stat {}", canon.display())))?;
    let image = image_path(&canon);
    match loop_mount(
        &canon,
        &image,
        quota_bytes,
        (meta.uid(), meta.gid()),
        &tools,
    ) {
        Ok(mode) => {
            tracing::info!(root = %canon.display(), ?mode, "workspace quota enforced by a loop-mounted image");
            Ok(mode)
        }
        Err(e @ (QuotaError::BadImage { .. } | QuotaError::NotADirectory { .. })) => Err(e),
        Err(e) => Ok(soft(format!(
            "the {quota} quota image could not be set up ({e})"
        ))),
    }
}

/// Whether `root` exists: a directory (`true`) or nothing yet (`false`); anything else is an
/// error.
fn is_dir_or_missing(root: &Path) -> Result<bool, QuotaError> {
    match fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => Err(QuotaError::NotADirectory {
            path: root.to_owned(),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(format!("cannot stat {}", root.display()))(e)),
    }
}

/// The mount already on the workspace at `canon` (its source, type and size), if there is
/// one: whoever mounted it bounds it.
fn already_mounted(canon: &Path) -> Result<Option<QuotaMode>, QuotaError> {
    let Some(m) = mount_at(canon)? else {
        return Ok(None);
    };
    let vfs = rustix::fs::statvfs(canon).map_err(|e| QuotaError::Io {
        context: format!("cannot statvfs {}", canon.display()),
        source: e.into(),
    })?;
    Ok(Some(QuotaMode::AlreadyMounted {
        source: m.source,
        fstype: m.fstype,
        size_bytes: vfs.f_blocks.saturating_mul(vfs.f_frsize),
    }))
}

/// Unmounts the workspace if it is a mount point (the loop device is released with it).
/// Idempotent: a workspace that is not mounted, or missing, is fine.
pub fn unmount(root: &Path) -> Result<(), QuotaError> {
    let canon = match fs::canonicalize(root) {
        Ok(c) => c,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(format!("cannot resolve {}", root.display()))(e)),
    };
    if mount_at(&canon)?.is_none() {
        return Ok(());
    }
    let umount = find_tool("umount").unwrap_or_else(|| PathBuf::from("umount"));
    run(Command::new(umount).arg(&canon))
}

/// Whether `root` is a mount point, according to `/proc/self/mountinfo`.
pub fn is_mountpoint(root: &Path) -> Result<bool, QuotaError> {
    Ok(mount_at(&canonical(root)?)?.is_some())
}

/// Our mount namespace when it differs from init's: a mount made there is invisible to the
/// Docker daemon, which resolves bind-mount sources in its own (normally init's) namespace.
/// `None` when they match or cannot be compared.
fn private_mount_namespace() -> Option<String> {
    let ours = fs::read_link("/proc/self/ns/mnt").ok()?;
    let init = fs::read_link("/proc/1/ns/mnt").ok()?;
    (ours != init).then(|| ours.display().to_string())
}

fn soft(reason: String) -> QuotaMode {
    tracing::warn!(%reason, "workspace quota is soft: only checked between executions");
    QuotaMode::Soft { reason }
}

fn canonical(p: &Path) -> Result<PathBuf, QuotaError> {
    fs::canonicalize(p).map_err(io_err(format!("cannot resolve {}", p.display())))
}

fn is_empty_dir(p: &Path) -> Result<bool, QuotaError> {
    let mut rd = fs::read_dir(p).map_err(io_err(format!("cannot read {}", p.display())))?;
    Ok(rd.next().is_none())
}

fn loop_mount(
    root: &Path,
    image: &Path,
    quota_bytes: u64,
    (uid, gid): (u32, u32),
    tools: &Tools,
) -> Result<QuotaMode, QuotaError> {
    let mut note = None;
    let mut created = false;
    match fs::symlink_metadata(image) {
        Ok(m) if !m.file_type().is_file() => {
            return Err(QuotaError::BadImage {
                path: image.to_owned(),
            });
        }
        Ok(m) if m.len() < quota_bytes => {
            grow(image, m.len(), quota_bytes, tools)?;
            note = Some(format!(
                "grew the existing image from {} to {}",
                super::HumanBytes(m.len()),
                super::HumanBytes(quota_bytes)
            ));
        }
        Ok(m) if m.len() > quota_bytes => {
            note = Some(format!(
                "kept the existing {} image although the quota is {}: ext4 images are not shrunk \
                 automatically (to shrink it, unmount, move the files out, delete {} and restart)",
                super::HumanBytes(m.len()),
                super::HumanBytes(quota_bytes),
                image.display()
            ));
            tracing::warn!(note = note.as_deref(), "workspace quota image");
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            create_image(image, quota_bytes, (uid, gid), tools)?;
            created = true;
        }
        Err(e) => return Err(io_err(format!("cannot stat {}", image.display()))(e)),
    }
    let mounted = run(Command::new(&tools.mount)
        .args(["-t", "ext4", "-o", MOUNT_OPTIONS])
        .arg(image)
        .arg(root));
    if let Err(e) = mounted {
        if created {
            let _ = fs::remove_file(image);
        }
        return Err(e);
    }
    if created {
        // mkfs makes lost+found; the workspace should start empty.
        match fs::remove_dir(root.join("lost+found")) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not remove lost+found from the new workspace")
            }
        }
    }
    let size_bytes = fs::metadata(image)
        .map_err(io_err(format!("cannot stat {}", image.display())))?
        .len();
    Ok(QuotaMode::LoopMount {
        image: image.to_owned(),
        size_bytes,
        note,
    })
}

fn create_image(
    image: &Path,
    size: u64,
    (uid, gid): (u32, u32),
    tools: &Tools,
) -> Result<(), QuotaError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(image)
        .map_err(io_err(format!("cannot create {}", image.display())))?;
    // Sparse: the image takes host space only as the workspace fills.
    let sized = file
        .set_len(size)
        .map_err(io_err(format!("cannot size {}", image.display())));
    drop(file);
    let made = sized.and_then(|()| {
        run(Command::new(&tools.mkfs)
            .args(["-q", "-F", "-m", "0", "-E"])
            .arg(format!("root_owner={uid}:{gid}"))
            .arg(image))
    });
    if made.is_err() {
        let _ = fs::remove_file(image);
    }
    made
}

fn grow(image: &Path, from: u64, to: u64, tools: &Tools) -> Result<(), QuotaError> {
    let Some(resize2fs) = tools.resize2fs.as_ref() else {
        return Err(QuotaError::Command {
            command: "resize2fs".into(),
            status: "not found".into(),
            stderr: format!(
                "cannot grow {} from {from} to {to} bytes without resize2fs",
                image.display()
            ),
        });
    };
    fs::OpenOptions::new()
        .write(true)
        .open(image)
        .and_then(|f| f.set_len(to))
        .map_err(io_err(format!("cannot grow {}", image.display())))?;
    // resize2fs insists on a freshly checked filesystem. e2fsck exits 1 when it fixed something.
    if let Some(e2fsck) = tools.e2fsck.as_ref() {
        let out = Command::new(e2fsck)
            .args(["-f", "-p"])
            .arg(image)
            .stdin(Stdio::null())
            .env("LC_ALL", "C")
            .output()
            .map_err(io_err(format!("cannot run {}", e2fsck.display())))?;
        if !matches!(out.status.code(), Some(0 | 1)) {
            return Err(command_error(e2fsck, &out));
        }
    }
    run(Command::new(resize2fs).arg(image))
}

struct Tools {
    mkfs: PathBuf,
    mount: PathBuf,
    resize2fs: Option<PathBuf>,
    e2fsck: Option<PathBuf>,
}

impl Tools {
    fn find() -> Option<Self> {
        find_tool("umount")?;
        Some(Self {
            mkfs: find_tool("mkfs.ext4")?,
            mount: find_tool("mount")?,
            resize2fs: find_tool("resize2fs"),
            e2fsck: find_tool("e2fsck"),
        })
    }
}

/// Looks a tool up in `PATH` and the sbin directories a non-login root shell may lack.
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

fn run(cmd: &mut Command) -> Result<(), QuotaError> {
    let out = cmd
        .stdin(Stdio::null())
        .env("LC_ALL", "C")
        .output()
        .map_err(io_err(format!(
            "cannot run {}",
            cmd.get_program().to_string_lossy()
        )))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(command_error_of(cmd, &out))
    }
}

fn command_error_of(cmd: &Command, out: &std::process::Output) -> QuotaError {
    let mut command = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        command.push(' ');
        command.push_str(&a.to_string_lossy());
    }
    QuotaError::Command {
        command,
        status: out.status.to_string(),
        stderr: stderr_text(out),
    }
}

fn command_error(program: &Path, out: &std::process::Output) -> QuotaError {
    QuotaError::Command {
        command: program.display().to_string(),
        status: out.status.to_string(),
        stderr: stderr_text(out),
    }
}

fn stderr_text(out: &std::process::Output) -> String {
    const MAX: usize = 2000;
    let text = String::from_utf8_lossy(&out.stderr);
    let text = text.trim();
    crate::text::cut(text, MAX)
}

// ----- /proc/self/mountinfo -----

/// One line of `/proc/self/mountinfo`, the parts we use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
}

/// The mount on exactly `path` (canonical), if any; the last one wins, as it hides the others.
fn mount_at(path: &Path) -> Result<Option<MountEntry>, QuotaError> {
    let text =
        fs::read("/proc/self/mountinfo").map_err(io_err("cannot read /proc/self/mountinfo"))?;
    Ok(parse_mountinfo(&text)
        .into_iter()
        .rfind(|m| m.mount_point == path))
}

/// Parses mountinfo: `id parent major:minor root mount_point options [optional...] - fstype
/// source super_options`, with space, tab, newline and backslash in paths escaped as `\ooo`.
pub(crate) fn parse_mountinfo(text: &[u8]) -> Vec<MountEntry> {
    text.split(|b| *b == b'\n')
        .filter_map(|line| {
            let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
            let sep = fields.iter().skip(6).position(|f| *f == b"-")? + 6;
            let mount_point = fields.get(4)?;
            let fstype = fields.get(sep + 1)?;
            let source = fields.get(sep + 2)?;
            Some(MountEntry {
                mount_point: PathBuf::from(OsString::from_vec(unescape_octal(mount_point))),
                fstype: String::from_utf8_lossy(&unescape_octal(fstype)).into_owned(),
                source: String::from_utf8_lossy(&unescape_octal(source)).into_owned(),
            })
        })
        .collect()
}

/// Undoes the kernel's `\ooo` escaping (three octal digits); anything else is kept as is.
fn unescape_octal(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\'
            && i + 3 < s.len()
            && s[i + 1..i + 4].iter().all(|d| (b'0'..=b'7').contains(d))
        {
            let v = s[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            if let Ok(b) = u8::try_from(v) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests;
