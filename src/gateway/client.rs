//! The client side of an upstream connection: the handler every connection shares, and
//! connecting over streamable HTTP with the entry's headers.

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams};
use rmcp::service::{RoleClient, RunningService};
use tokio::sync::mpsc;

/// The client side of one upstream connection: relists on `tools/list_changed`, and refuses
/// the upstream's questions for the user (the gateway has no user of its own to ask).
pub struct UpstreamClient {
    pub(super) name: String,
    pub(super) relist: mpsc::Sender<()>,
}

impl rmcp::ClientHandler for UpstreamClient {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        tracing::info!(upstream = %self.name, "upstream says its tool list changed");
        // A full channel already holds a relist request: one is enough.
        let _ = self.relist.try_send(());
    }

    // This error answers an upstream server, not the model, in fixed words.
    #[allow(clippy::disallowed_types, clippy::disallowed_methods)]
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Err(rmcp::ErrorData::invalid_request(
            "code-execution-mcp does not relay an upstream's questions to its user: the tool must work without elicitation when called from code",
            None,
        ))
    }

    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("code-execution-mcp", env!("CARGO_PKG_VERSION")),
        )
    }
}

pub(super) async fn connect_http(
    handler: UpstreamClient,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    limits: super::UpstreamLimits,
) -> Result<RunningService<RoleClient, UpstreamClient>, String> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut custom = std::collections::HashMap::new();
    for (k, v) in headers {
        let name = http::HeaderName::try_from(k.as_str())
            .map_err(|_| format!("header name {k:?} is not valid"))?;
        let value = http::HeaderValue::try_from(v.as_str())
            .map_err(|_| format!("the value of header {k} is not a valid header value"))?;
        custom.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    config.custom_headers = custom;
    config.max_sse_event_size = limits.max_message_bytes;
    let transport = StreamableHttpClientTransport::from_config(config);
    let shown = super::upstreams_file::shown_url(url);
    handler
        .serve(transport)
        .await
        .map_err(|e| format!("{shown} failed to initialize: {e}"))
}
