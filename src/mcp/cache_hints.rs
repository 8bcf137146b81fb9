//! The cache hints of MCP 2026-07-28 (`ttlMs`, `cacheScope` on `tools/list`, `resources/list`,
//! `resources/templates/list` and `resources/read`), chosen to say what is true of each answer.
//! rmcp fills a missing hint with `ttlMs: 0` and `private`, which is safe but makes a client
//! refetch what never changes; its `#[tool_handler]` marks `tools/list` `public`, which stops
//! being true once the listing names the tenant's upstreams.
//!
//! | answer | `cacheScope` | `ttlMs` |
//! |---|---|---|
//! | `tools/list`, the tenant has upstreams | private | 10 000 |
//! | `tools/list`, no upstreams | public (private with tokens) | 3 600 000 |
//! | `resources/templates/list` | public (private with tokens) | 3 600 000 |
//! | `resources/read` of a tool's reference (`docs://tools/NAME`) | public (private with tokens) | 3 600 000 |
//! | `resources/list`, `resources/read` (workspace and `skill://` files) | private | 0 |
//! | `skills/list`, `skills/get` (rmcp's defaults, set by no one here) | private | 0 |
//!
//! - **Scope.** `private` whenever the answer depends on the tenant or on its upstreams: the
//!   listing names the user's own servers, the workspace holds the user's files. `public` only
//!   for what every client of this server gets alike (the fixed tools without upstreams, the
//!   resource templates, the tools' references). With bearer tokens every answer is `private`: the server answers
//!   several tenants, and a cache shared between them must never hand one's answer to another,
//!   even where the two happen to be the same today.
//! - **Time.** `0` for the workspace and the saved skills: code changes them at any moment
//!   (`write_file`, `save_skill`), and a client that wants to hear of workspace changes
//!   listens. 10 s for a listing that follows the upstreams: it changes
//!   when an upstream's tool list does, which a listening client hears of at once
//!   (`toolsListChanged`) and any other client within 10 s. An hour for what only a new
//!   server version changes.
//!
//! Hints go to clients of 2026-07-28 or later only, as rmcp's own handler does; older clients
//! get the results as before.

use rmcp::RoleServer;
use rmcp::model::{CacheScope, ProtocolVersion};
use rmcp::service::RequestContext;

use crate::app::App;

/// `tools/list` while it follows the upstreams.
pub const UPSTREAM_TTL_MS: u64 = 10_000;
/// What only a new server version changes.
pub const STATIC_TTL_MS: u64 = 3_600_000;
/// The workspace's files and listing.
pub const WORKSPACE_TTL_MS: u64 = 0;

/// A `ttlMs` and `cacheScope` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    pub ttl_ms: u64,
    pub scope: CacheScope,
}

/// Whether the request's protocol version carries cache hints.
pub fn wanted(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// `tools/list` for this tenant.
pub fn tools(app: &App) -> Hint {
    if super::has_upstreams(app) {
        Hint {
            ttl_ms: UPSTREAM_TTL_MS,
            scope: CacheScope::Private,
        }
    } else {
        fixed(app)
    }
}

/// `resources/templates/list`: one fixed template.
pub fn templates(app: &App) -> Hint {
    fixed(app)
}

/// `resources/list` and `resources/read`: the tenant's files (workspace files, and the
/// `skill://` files of its saved skills).
pub fn workspace() -> Hint {
    Hint {
        ttl_ms: WORKSPACE_TTL_MS,
        scope: CacheScope::Private,
    }
}

/// `resources/read` of a tool's reference: fixed, like the tools it describes.
pub fn reference(app: &App) -> Hint {
    fixed(app)
}

/// What every client of the server gets alike, until a new version.
fn fixed(app: &App) -> Hint {
    Hint {
        ttl_ms: STATIC_TTL_MS,
        scope: if app.config().has_tenants() {
            CacheScope::Private
        } else {
            CacheScope::Public
        },
    }
}
