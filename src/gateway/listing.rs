//! What `tools/list` tells a model about one tenant's upstreams: the `servers` modules its code
//! can import, each with its tool count, and the version of the generated package. Without it
//! `tools/list` reads the same whatever the upstreams, and a model learns that code can call
//! the user's own servers only if it happens to run `search_tools`.
//!
//! The sentence is bounded: at most [`MAX_NAMED`] modules are named (the others are counted),
//! and each name is a Python identifier of at most about 100 characters (see [`super::names`]),
//! so it stays under about 1.2 KB whatever the upstreams file holds. Modules are named in the
//! order of their identifiers, so the same upstreams always give the same text.
//!
//! A listing is compared whole: it changes when a module appears, goes or changes its tool
//! count, and, through `package` (the hash of the generated files, [`super::tree`]), when any
//! tool's name, description or schema changes. That comparison decides when this tenant's
//! clients are told `notifications/tools/list_changed`.

use super::stubs::PythonNames;

/// Modules named in the sentence; the rest are counted ("and 3 more").
pub const MAX_NAMED: usize = 8;

/// One tenant's upstreams as `tools/list` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamListing {
    /// Each upstream's module and its tools now (0 while it is not connected), by module.
    pub servers: Vec<ListedServer>,
    /// The generated package's version (`None`: no upstreams).
    pub package: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedServer {
    /// The module in the `servers` package (`from servers import <module>`).
    pub module: String,
    pub tools: usize,
}

impl UpstreamListing {
    /// The listing of a package made with `names`, at `package`.
    pub fn of(names: &PythonNames, package: Option<String>) -> Self {
        let mut servers: Vec<ListedServer> = names
            .modules
            .values()
            .map(|(module, functions)| ListedServer {
                module: module.clone(),
                tools: functions.len(),
            })
            .collect();
        servers.sort_by(|a, b| a.module.cmp(&b.module));
        Self { servers, package }
    }

    /// The sentence `execute_code`'s description ends with; `None` without upstreams.
    pub fn sentence(&self) -> Option<String> {
        if self.servers.is_empty() {
            return None;
        }
        let named: Vec<String> = self
            .servers
            .iter()
            .take(MAX_NAMED)
            .map(|s| {
                let unit = if s.tools == 1 { "tool" } else { "tools" };
                format!("`from servers import {}` ({} {unit})", s.module, s.tools)
            })
            .collect();
        let mut text = format!("Code can call these MCP servers: {}", named.join(", "));
        let more = self.servers.len().saturating_sub(MAX_NAMED);
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text.push_str("; search_tools finds their tools.");
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::stubs::ServerStubs;
    use crate::gateway::tools::LiveTool;

    fn tool(name: &str) -> LiveTool {
        LiveTool {
            name: name.into(),
            title: None,
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            destructive: false,
            read_only: true,
        }
    }

    fn listing(servers: &[(&str, usize)]) -> UpstreamListing {
        let tools: Vec<(String, Vec<LiveTool>)> = servers
            .iter()
            .map(|(name, n)| {
                (
                    name.to_string(),
                    (0..*n).map(|i| tool(&format!("t{i}"))).collect(),
                )
            })
            .collect();
        let stubs: Vec<ServerStubs<'_>> = tools
            .iter()
            .map(|(name, tools)| ServerStubs { name, tools })
            .collect();
        UpstreamListing::of(&PythonNames::of(&stubs), Some("v1".into()))
    }

    #[test]
    fn names_modules_as_code_imports_them_with_their_tool_counts() {
        let l = listing(&[("time", 2), ("weird-name.v2", 1), ("class", 0)]);
        assert_eq!(
            l.sentence().unwrap(),
            "Code can call these MCP servers: `from servers import class_` (0 tools), \
             `from servers import time` (2 tools), `from servers import weird_name_v2` (1 tool); \
             search_tools finds their tools."
        );
    }

    #[test]
    fn no_upstreams_no_sentence() {
        assert_eq!(UpstreamListing::default().sentence(), None);
    }

    #[test]
    fn names_at_most_max_named_and_counts_the_rest() {
        let names: Vec<String> = (0..MAX_NAMED + 3).map(|i| format!("s{i:02}")).collect();
        let servers: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 1)).collect();
        let text = listing(&servers).sentence().unwrap();
        assert_eq!(text.matches("from servers import").count(), MAX_NAMED);
        assert!(text.contains("`from servers import s00`"), "{text}");
        assert!(!text.contains(&format!("s{:02}", MAX_NAMED)), "{text}");
        assert!(text.ends_with(" and 3 more; search_tools finds their tools."));
        // Long names stay bounded.
        let long: Vec<String> = (0..50)
            .map(|i| format!("{i:02}{}", "x".repeat(300)))
            .collect();
        let servers: Vec<(&str, usize)> = long.iter().map(|n| (n.as_str(), 1)).collect();
        assert!(listing(&servers).sentence().unwrap().len() < 1300);
    }

    #[test]
    fn a_listing_changes_with_a_count_a_module_or_the_package() {
        let a = listing(&[("time", 2)]);
        assert_eq!(a, listing(&[("time", 2)]));
        assert_ne!(a, listing(&[("time", 3)]));
        assert_ne!(a, listing(&[("time", 2), ("git", 1)]));
        let mut b = a.clone();
        b.package = Some("v2".into());
        assert_ne!(a, b, "a renamed tool changes the package only");
    }
}
