//! Errors of the discovery module. Most reach a model through `search_tools` or
//! `get_tool_definition`, so each message says what to do next, not only what went wrong.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error(
        "unknown category '{given}'. Known categories: {}. Call list_tool_categories to see what \
         each holds, or leave the category out to search them all.",
        known.join(", ")
    )]
    UnknownCategory { given: String, known: Vec<String> },

    #[error(
        "no tool '{given}'{}. {} Use search_tools to find a tool by what it does; tools are \
         addressed as \"server/name\".",
        in_category(category),
        closest_line(closest)
    )]
    ToolNotFound {
        given: String,
        category: Option<String>,
        closest: Vec<String>,
    },

    #[error(
        "'{given}' is the name of {} tools: {}. Pass one of these \"server/name\" ids instead.",
        ids.len(),
        ids.join(", ")
    )]
    AmbiguousTool { given: String, ids: Vec<String> },

    #[error("cannot read the tool registry at {}: {source}", path.display())]
    Registry {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn in_category(category: &Option<String>) -> String {
    category
        .as_ref()
        .map(|c| format!(" in category '{c}'"))
        .unwrap_or_default()
}

fn closest_line(closest: &[String]) -> String {
    if closest.is_empty() {
        "Nothing with a similar name exists.".to_owned()
    } else {
        format!("Closest: {}.", closest.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let e = DiscoveryError::ToolNotFound {
            given: "github/creat_issue".into(),
            category: None,
            closest: vec!["github/create_issue".into()],
        };
        let m = e.to_string();
        assert!(
            m.contains("Closest: github/create_issue.") && m.contains("search_tools"),
            "{m}"
        );

        let e = DiscoveryError::UnknownCategory {
            given: "weather".into(),
            known: vec!["finance".into(), "news".into()],
        };
        assert!(e.to_string().contains("finance, news"));
        assert!(e.to_string().contains("list_tool_categories"));
    }
}
