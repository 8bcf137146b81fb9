//! Skill tools with the original's arguments and fields: `save_skill` ({success, message}),
//! `load_skill` ({name, code, metadata}), `list_skills` ({count, skills}), plus `delete_skill`.
//! Names, sizes and storage rules live in `crate::skills`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CodeExecutionServer, MessageResponse, NoArgs};
use crate::privacy::{Json, Reply};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveSkillArgs {
    /// Letters, digits, underscores: also the function the code defines.
    pub name: String,
    /// Typically `def NAME(...): ...`.
    pub code: String,
    /// For list_skills.
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillNameArgs {
    pub name: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LoadSkillResponse {
    pub name: String,
    pub code: String,
    /// name, description, created, updated, sha256, version, size.
    pub metadata: Value,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ListSkillsResponse {
    pub count: usize,
    pub skills: Vec<Value>,
}

#[tool_router(router = skills_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Save Python code as a named skill, kept across sessions; code imports it with `from skills import NAME`. Overwriting keeps the earlier version.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn save_skill(
        &self,
        Parameters(args): Parameters<SaveSkillArgs>,
    ) -> Result<Json<MessageResponse>, Reply> {
        let skills = self.app.skills().clone();
        let name = args.name.clone();
        tokio::task::spawn_blocking(move || skills.save(&args.name, &args.code, &args.description))
            .await
            .map_err(|e| self.failure(e))?
            .map_err(|e| self.failure(e))?;
        Ok(self.app.privacy().json(MessageResponse::ok(format!(
            "Skill '{name}' saved successfully"
        ))))
    }

    #[tool(
        description = "Load a saved skill's code and metadata.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn load_skill(
        &self,
        Parameters(args): Parameters<SkillNameArgs>,
    ) -> Result<Json<LoadSkillResponse>, Reply> {
        let skills = self.app.skills().clone();
        let skill = tokio::task::spawn_blocking(move || skills.load(&args.name))
            .await
            .map_err(|e| self.failure(e))?
            .map_err(|e| self.failure(e))?;
        let metadata = serde_json::to_value(&skill.meta).map_err(|e| self.failure(e))?;
        Ok(self.app.privacy().json(LoadSkillResponse {
            name: skill.meta.name.clone(),
            metadata,
            code: skill.code,
        }))
    }

    #[tool(
        description = "List the saved skills with their descriptions.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_skills(
        &self,
        Parameters(_): Parameters<NoArgs>,
    ) -> Result<Json<ListSkillsResponse>, Reply> {
        let skills = self.app.skills().clone();
        let list = tokio::task::spawn_blocking(move || skills.list())
            .await
            .map_err(|e| self.failure(e))?
            .map_err(|e| self.failure(e))?;
        let skills: Vec<Value> = list
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(|e| self.failure(e))?;
        Ok(self.app.privacy().json(ListSkillsResponse {
            count: skills.len(),
            skills,
        }))
    }

    #[tool(
        description = "Delete a saved skill (its versions stay in the skill history).",
        annotations(destructive_hint = true, open_world_hint = false)
    )]
    async fn delete_skill(
        &self,
        Parameters(args): Parameters<SkillNameArgs>,
    ) -> Result<Json<MessageResponse>, Reply> {
        let skills = self.app.skills().clone();
        let name = args.name.clone();
        tokio::task::spawn_blocking(move || skills.delete(&args.name))
            .await
            .map_err(|e| self.failure(e))?
            .map_err(|e| self.failure(e))?;
        Ok(self
            .app
            .privacy()
            .json(MessageResponse::ok(format!("Skill '{name}' deleted"))))
    }
}
