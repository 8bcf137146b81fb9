//! PII tools with the original's fields: `sanitize_pii` ({sanitized_text, pii_found, pii_types})
//! and `restore_pii` ({restored_text}). The engine (`crate::pii`) mints tokens with a
//! per-server secret and restores only tokens it minted.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::CodeExecutionServer;
use crate::pii::Origin;
use crate::privacy::check_restore_budget;
use crate::privacy::{Json, Reply};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextArgs {
    pub text: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SanitizeResponse {
    /// The text with each value replaced by a token such as [EMAIL_ab12cd34].
    pub sanitized_text: String,
    /// Number of values replaced.
    pub pii_found: usize,
    /// Types found: EMAIL, PHONE, SSN, CREDIT_CARD, IP_ADDRESS, API_KEY, IBAN.
    pub pii_types: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RestoreResponse {
    pub restored_text: String,
    /// Tokens replaced by their values.
    pub restored: usize,
    /// Token-shaped strings this server did not mint (left unchanged).
    pub unknown: usize,
}

#[tool_router(router = pii_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Replace personal data and secrets in text with tokens like [EMAIL_ab12cd34].",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn sanitize_pii(
        &self,
        Parameters(args): Parameters<TextArgs>,
    ) -> Result<Json<SanitizeResponse>, Reply> {
        let pii = self.app.pii().clone();
        let s = tokio::task::spawn_blocking(move || pii.sanitize_from(&args.text, &Origin::User))
            .await
            .map_err(|e| self.error(e.to_string()))?;
        let mut pii_types: Vec<String> = s
            .tokens
            .keys()
            .filter_map(|t| {
                t.strip_prefix('[')?
                    .rsplit_once('_')
                    .map(|(k, _)| k.to_string())
            })
            .collect();
        pii_types.sort();
        pii_types.dedup();
        Ok(self.app.privacy().json(SanitizeResponse {
            pii_found: s.tokens.len(),
            pii_types,
            sanitized_text: s.text,
        }))
    }

    #[tool(
        description = "Turn this server's PII tokens back into values; unknown tokens stay.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn restore_pii(
        &self,
        Parameters(args): Parameters<TextArgs>,
    ) -> Result<Json<RestoreResponse>, Reply> {
        check_restore_budget(&args.text).map_err(|e| self.error(e))?;
        let pii = self.app.pii().clone();
        let r = tokio::task::spawn_blocking(move || pii.restore(&args.text))
            .await
            .map_err(|e| self.error(e.to_string()))?;
        // The values the model asked to have back: the one answer shown as it is.
        Ok(self.app.privacy().revealed(RestoreResponse {
            restored_text: r.text,
            restored: r.restored,
            unknown: r.unknown,
        }))
    }
}
