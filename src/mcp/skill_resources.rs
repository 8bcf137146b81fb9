//! The saved skills as MCP skills (the Skills extension, `io.modelcontextprotocol/skills`):
//! `skills/list`, `skills/get`, and `resources/read` of their `skill://` files. A read-only view
//! of this tenant's store (one [`App`] is one tenant, so no other tenant's skill is reachable);
//! writes stay with `save_skill`. The mapping to the Agent Skills format is
//! [`crate::skills::agent_skill`].
//!
//! The texts take `load_skill`'s privacy path: the description and the code go through the PII
//! engine before anything is rendered or hashed, so the digests describe the bytes a client
//! reads, and a skill whose very name the engine would tokenize is not published (its URI would
//! show the value). Tokens are keyed, so the same skill renders to the same bytes on every call.
//!
//! Errors follow the extension: a URI that names no published skill file is `-32602` (invalid
//! params), a store that cannot be read `-32603`, each saying what to do.

use rmcp::model::{
    ErrorCode, GetSkillResult, ListSkillsResult, ReadResourceResult, Skill, SkillFrontmatter,
    SkillResource, SkillResources,
};

use crate::app::App;
use crate::privacy::{self, Refusal};
use crate::skills::agent_skill::{
    self, AgentSkill, CODE_MIME, SKILL_MD_MIME, SkillFile, SkillSource, SkillUriError,
};
use crate::skills::{SkillError, validate_name};

pub use agent_skill::is_skill_uri;

/// Skills per `skills/list` page (each is read and hashed whole).
pub const PAGE_SIZE: usize = 50;

pub async fn list(app: &App, cursor: Option<String>) -> Result<ListSkillsResult, Refusal> {
    if let Some(c) = &cursor
        && validate_name(c).is_err()
    {
        return Err(invalid(
            app,
            format!("invalid cursor {c:?}: pass the nextCursor of the previous skills/list page"),
        ));
    }
    let store = app.skills().clone();
    let listed = tokio::task::spawn_blocking(move || store.list())
        .await
        .map_err(|e| internal(app, e))?
        .map_err(|e| internal(app, e))?;
    let mut names = listed
        .into_iter()
        .map(|meta| meta.name)
        .filter(|name| cursor.as_ref().is_none_or(|c| name > c))
        .filter(|name| agent_skill::agent_name(name).is_some())
        .peekable();
    let mut skills = Vec::new();
    let mut next_cursor = None;
    while let Some(name) = names.next() {
        match load(app, &name).await {
            Ok(Some(skill)) => skills.extend(publish(app, skill).as_ref().map(entry)),
            Ok(None) => {} // deleted since the listing
            Err(e) => {
                tracing::warn!(skill = %name, error = %e.message, "skills/list skips a skill it cannot read");
            }
        }
        if skills.len() == PAGE_SIZE && names.peek().is_some() {
            next_cursor = Some(name);
            break;
        }
    }
    let mut result = ListSkillsResult::with_all_items(skills);
    result.next_cursor = next_cursor;
    Ok(result)
}

pub async fn get(app: &App, uri: String) -> Result<GetSkillResult, Refusal> {
    let (skill, file) = find(app, &uri).await?;
    if file != SkillFile::SkillMd {
        return Err(invalid(
            app,
            format!(
                "{uri:?} is not the URI of a SKILL.md: ask skills/get for {}",
                skill.skill_md_uri()
            ),
        ));
    }
    Ok(GetSkillResult::new(entry(&skill)))
}

pub async fn read(app: &App, uri: String) -> Result<ReadResourceResult, Refusal> {
    let (skill, file) = find(app, &uri).await?;
    let mime = match file {
        SkillFile::SkillMd => SKILL_MD_MIME,
        SkillFile::Code => CODE_MIME,
    };
    // Rendered from texts the engine read; through it again at the road (unchanged: a
    // tokenized text passes as it is, so the digests `skills/list` gave still hold).
    let text = app.privacy().text(skill.text(file).to_string());
    let contents = privacy::text_contents(text, uri).with_mime_type(mime);
    Ok(ReadResourceResult::new(vec![contents]))
}

/// The published skill and file `uri` names.
async fn find(app: &App, uri: &str) -> Result<(AgentSkill, SkillFile), Refusal> {
    let address = agent_skill::parse_uri(uri).map_err(|e| invalid(app, e))?;
    let not_served = || {
        invalid(
            app,
            SkillUriError::NotFound {
                uri: uri.into(),
                store_name: address.store_name.clone(),
            },
        )
    };
    let skill = load(app, &address.store_name)
        .await?
        .ok_or_else(not_served)?;
    let skill = publish(app, skill).ok_or_else(not_served)?;
    Ok((skill, address.file))
}

/// The stored skill `name` with its code, `None` when there is none.
async fn load(app: &App, name: &str) -> Result<Option<crate::skills::Skill>, Refusal> {
    let store = app.skills().clone();
    let name = name.to_owned();
    match tokio::task::spawn_blocking(move || store.load(&name))
        .await
        .map_err(|e| internal(app, e))?
    {
        Ok(skill) => Ok(Some(skill)),
        Err(SkillError::NotFound { .. }) => Ok(None),
        Err(e) => Err(internal(app, e)),
    }
}

/// `skill` in the Agent Skills format, its texts through the privacy path; `None` when it is not
/// published (no Agent Skills name, or a name the PII engine would change).
fn publish(app: &App, skill: crate::skills::Skill) -> Option<AgentSkill> {
    let privacy = app.privacy();
    let name = skill.meta.name;
    if privacy.text(name.clone()).as_str() != name {
        return None;
    }
    let description = privacy.text(skill.meta.description);
    let code = privacy.text(skill.code);
    AgentSkill::render(&SkillSource {
        store_name: &name,
        description: description.as_str(),
        code: code.as_str(),
        version: skill.meta.version,
    })
}

/// The extension's entry for `skill`: its frontmatter and both files with digest and size.
fn entry(skill: &AgentSkill) -> Skill {
    let front = &skill.frontmatter;
    let metadata: serde_json::Map<String, serde_json::Value> = front
        .metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone().into()))
        .collect();
    let frontmatter =
        SkillFrontmatter::new(&front.name, &front.description).with_field("metadata", metadata);
    let skill_md = skill.skill_md_uri();
    let files = vec![
        SkillResource::from_bytes(&skill_md, skill.skill_md.as_bytes()),
        SkillResource::from_bytes(skill.code_uri(), skill.code.as_bytes()),
    ];
    Skill::new(skill_md, frontmatter, SkillResources::Files(files))
}

fn invalid(app: &App, message: impl std::fmt::Display) -> Refusal {
    app.privacy().refusal(ErrorCode::INVALID_PARAMS, message)
}

fn internal(app: &App, error: impl std::fmt::Display) -> Refusal {
    app.privacy().refusal(ErrorCode::INTERNAL_ERROR, error)
}
