//! An execution's packages: the requirements the call names, joined with those its session
//! kept, made importable through the server's package cache (`crate::packages`) under the
//! tenant's policy, before the code runs. A session keeps what it installed: its requirements
//! are stored with it (and so travel across a restart), and its later calls mount the same set
//! without naming them.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::execution::sessions::Turn;
use crate::app::{App, ExecuteError};
use crate::audit::record::{AuditPackages, AuditWheel};
use crate::packages::requirement::{merged, parse_all};
use crate::packages::{Installed, PackageError, Requirement};

/// One distribution of the set the code ran with.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InstalledPackage {
    pub name: String,
    pub version: String,
}

/// What `execute_code` says of the packages the code ran with.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PackagesReport {
    /// The requirements the set was resolved from (the call's, and its session's).
    pub requested: Vec<String>,
    /// Every distribution installed for them, dependencies included; a requirement the image
    /// already satisfies adds none.
    pub installed: Vec<InstalledPackage>,
    /// True when the set was already installed (by any call, session or tenant).
    pub from_cache: bool,
    /// Seconds spent making the set importable (resolving and installing, or finding it).
    pub seconds: f64,
}

/// The set an execution runs with, held until it ends (the cache keeps it meanwhile).
pub struct ExecutionPackages {
    pub installed: Installed,
    /// The call named packages of its own (the session's list changes).
    pub named: bool,
}

impl ExecutionPackages {
    pub fn set(&self) -> &str {
        &self.installed.meta.set
    }

    pub fn report(&self) -> PackagesReport {
        PackagesReport {
            requested: (self.installed.requested.iter())
                .map(|r| r.text.clone())
                .collect(),
            installed: (self.installed.meta.resolved.iter())
                .map(|r| InstalledPackage {
                    name: r.name.clone(),
                    version: r.version.clone(),
                })
                .collect(),
            from_cache: self.installed.from_cache,
            seconds: (self.installed.took.as_secs_f64() * 1000.0).round() / 1000.0,
        }
    }
}

impl ExecutionPackages {
    /// The audit trail's account of the set.
    pub fn audit(&self) -> AuditPackages {
        let i = &self.installed;
        AuditPackages {
            requested: i.requested.iter().map(|r| r.text.clone()).collect(),
            outcome: if i.from_cache { "cached" } else { "installed" }.into(),
            set: Some(i.meta.set.clone()),
            resolved: (i.meta.resolved.iter())
                .map(|r| AuditWheel {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    sha256: r.sha256.clone(),
                })
                .collect(),
            duration_ms: millis(i.took),
        }
    }
}

/// The audit trail's account of packages that could not be made importable.
pub fn failed_audit(error: &PackageError, requested: &[String], took: Duration) -> AuditPackages {
    AuditPackages {
        requested: requested.to_vec(),
        outcome: error.outcome().into(),
        set: None,
        resolved: Vec::new(),
        duration_ms: millis(took),
    }
}

impl App {
    /// The session's turn and the packages the call runs with. Without a session, or for a
    /// new one, the packages come first (a failure then creates no session); a continued
    /// session's come within its turn, once its previous call has kept what it installed.
    pub(crate) async fn turn_and_packages(
        &self,
        session: Option<String>,
        fork: bool,
        named: &[String],
    ) -> Result<(Option<Turn>, Option<ExecutionPackages>), ExecuteError> {
        let continued = session.as_deref().is_some_and(|s| s != "new");
        if !continued {
            let packages = self.packages_for(named, None).await?;
            let turn = self.session_turn(session, fork).await?;
            if let (Some(turn), Some(packages)) = (&turn, &packages) {
                self.keep_session_packages(&turn.handle, packages);
            }
            return Ok((turn, packages));
        }
        let turn = self.session_turn(session, fork).await?;
        let handle = turn.as_ref().map(|t| t.handle.as_str());
        match self.packages_for(named, handle).await {
            Ok(packages) => {
                if let (Some(turn), Some(packages)) = (&turn, &packages) {
                    self.keep_session_packages(&turn.handle, packages);
                }
                Ok((turn, packages))
            }
            Err(e) => {
                if let Some(turn) = turn {
                    turn.abandon();
                }
                Err(e)
            }
        }
    }

    /// The set the call runs with: none when neither the call nor its session names packages.
    /// A failure is the call's error, and the code does not run.
    pub(crate) async fn packages_for(
        &self,
        named: &[String],
        session: Option<&str>,
    ) -> Result<Option<ExecutionPackages>, ExecuteError> {
        let started = Instant::now();
        let failed = |error: PackageError, requested: Vec<String>| ExecuteError::Packages {
            error,
            requested,
            took: started.elapsed(),
        };
        let new = if named.is_empty() {
            Vec::new()
        } else {
            parse_all(named).map_err(|e| failed(e.into(), named.to_vec()))?
        };
        let kept = self.session_packages(session);
        if new.is_empty() && kept.is_empty() {
            return Ok(None);
        }
        let requested = merged(&kept, &new);
        let texts: Vec<String> = requested.iter().map(|r| r.text.clone()).collect();
        let Some(sets) = self.shared.packages.as_ref() else {
            return Err(failed(PackageError::Disabled, texts));
        };
        let policy = (self.shared.package_policy).for_tenant(self.tenant.as_deref());
        let installed = sets
            .ensure(&self.shared.image_id, requested, &policy)
            .await
            .map_err(|e| failed(e, texts))?;
        Ok(Some(ExecutionPackages {
            installed,
            named: !new.is_empty(),
        }))
    }

    /// The requirements a session keeps (none for a new one).
    fn session_packages(&self, session: Option<&str>) -> Vec<Requirement> {
        let Some(handle) = session else {
            return Vec::new();
        };
        let texts = self.sessions.packages(handle);
        if texts.is_empty() {
            return Vec::new();
        }
        parse_all(&texts).unwrap_or_default()
    }

    /// Stores a session's requirements once its call has installed them.
    pub(crate) fn keep_session_packages(&self, handle: &str, packages: &ExecutionPackages) {
        if !packages.named {
            return;
        }
        let texts: Vec<String> = (packages.installed.requested.iter())
            .map(|r| r.text.clone())
            .collect();
        if let Err(e) = self.sessions.set_packages(handle, &texts) {
            tracing::warn!("a session's packages were not saved: {e}");
        }
    }
}

/// An install's time as the audit trail records it.
pub fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}
