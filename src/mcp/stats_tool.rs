//! `get_execution_stats`: [`App::stats_report`](crate::app::App::stats_report), through the
//! privacy layer.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

use super::{CodeExecutionServer, NoArgs};
use crate::app::stats::ExecutionStatsResponse;
use crate::privacy::{Json, Reply};

#[tool_router(router = stats_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Statistics of this server (executions, latency, limits, workspace, sessions, pool, engine).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_execution_stats(
        &self,
        Parameters(_): Parameters<NoArgs>,
    ) -> Result<Json<ExecutionStatsResponse>, Reply> {
        let report = (self.app.stats_report().await).map_err(|e| self.error(e.to_string()))?;
        Ok(self.app.privacy().json(report))
    }
}
