//! A small synonym map for the words agents use when the tool's author used another.
//!
//! Agents ask to "fetch" what a tool "gets", to "remove" what it "deletes", for a "repo" where
//! it says "repository". Each group below lists interchangeable words or phrases; a query that
//! contains one member also searches for the others at a lower weight (`WEIGHT`), so the
//! user's own word still counts most. Groups are stemmed with the index's analyzer when a
//! registry is built, so "removing" finds the "delete" group too.
//!
//! Kept honest by the benchmark: `benches/discovery.rs` reports recall with and without this
//! map. A group belongs here only if its words are interchangeable in tool descriptions in
//! general, not because one labeled query needed it.

use std::collections::HashMap;

/// Weight of a synonym relative to a word the query actually contains.
pub const WEIGHT: f32 = 0.4;

const GROUPS: &[&[&str]] = &[
    &["fetch", "get", "retrieve", "read", "obtain"],
    &["delete", "remove", "erase", "destroy"],
    &["create", "make", "add", "new"],
    &["list", "enumerate", "show all"],
    &["update", "edit", "modify", "change"],
    &["search", "find", "lookup"],
    &["email", "mail", "e-mail"],
    &["repo", "repository"],
    &["db", "database"],
    &["pr", "pull request", "merge request"],
    &["k8s", "kubernetes"],
    &["msg", "message"],
    &["dm", "direct message"],
    &["doc", "document"],
    &["img", "image", "picture", "photo"],
    &["dir", "directory", "folder"],
    &["run", "execute", "exec"],
    &["ticket", "issue"],
    &["todo", "task"],
    &["calendar event", "meeting", "appointment"],
    &["forecast", "weather"],
    &["stock", "share price", "equity"],
    &["crypto", "cryptocurrency"],
    &["url", "link"],
    &["website", "web page", "webpage", "site"],
    &["spreadsheet", "sheet", "workbook"],
    &["presentation", "slides", "slide deck"],
    &["chart", "graph", "plot"],
    &["summary", "summarize"],
    &["vuln", "vulnerability", "cve"],
    &["password", "credential", "secret"],
    &["directions", "route"],
    &["song", "music"],
    &["company", "organization", "business"],
    &["env", "environment"],
    &["config", "configuration", "settings"],
    &["auth", "authentication", "login"],
    &["stats", "statistics", "metrics"],
];

/// The groups as stemmed term sequences, ready to match against an analysed query.
#[derive(Debug, Default)]
pub struct Synonyms {
    /// Every member of every group (a member is a phrase: one or more stems).
    members: Vec<Vec<String>>,
    /// Member index → the group it belongs to.
    group_of: Vec<usize>,
    /// Group → its members.
    groups: Vec<Vec<usize>>,
    /// First stem of a member → members starting with it (to match without scanning all).
    by_first: HashMap<String, Vec<usize>>,
}

impl Synonyms {
    /// Builds the map, turning every phrase into stems with `analyze`.
    pub fn build(analyze: impl Fn(&str) -> Vec<String>) -> Synonyms {
        let mut s = Synonyms::default();
        for (g, group) in GROUPS.iter().enumerate() {
            let mut members = Vec::new();
            for phrase in *group {
                let stems = analyze(phrase);
                if stems.is_empty() {
                    continue;
                }
                let m = s.members.len();
                s.by_first.entry(stems[0].clone()).or_default().push(m);
                s.members.push(stems);
                s.group_of.push(g);
                members.push(m);
            }
            s.groups.push(members);
        }
        s
    }

    /// The stems to add for a query made of `stems`: every other member of each group one of
    /// whose members occurs in the query as a contiguous run.
    pub fn expand(&self, stems: &[String]) -> Vec<&str> {
        let mut out = Vec::new();
        let mut used_groups = Vec::new();
        for start in 0..stems.len() {
            for &m in self
                .by_first
                .get(&stems[start])
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let member = &self.members[m];
                if stems[start..].starts_with(member) && !used_groups.contains(&self.group_of[m]) {
                    used_groups.push(self.group_of[m]);
                }
            }
        }
        for g in used_groups {
            for &m in &self.groups[g] {
                for stem in &self.members[m] {
                    if !stems.contains(stem) && !out.contains(&stem.as_str()) {
                        out.push(stem.as_str());
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> Vec<String> {
        s.split(['-', ' ']).map(str::to_owned).collect()
    }

    #[test]
    fn expands_single_words_and_phrases_both_ways() {
        let syn = Synonyms::build(plain);
        let q = |s: &str| syn.expand(&plain(s));
        assert!(q("remove file").contains(&"delete"));
        assert!(q("open pr").contains(&"pull") && q("open pr").contains(&"request"));
        assert!(q("review pull request").contains(&"pr"));
        assert!(
            !q("pull the lever").contains(&"pr"),
            "a phrase matches only as a whole"
        );
        assert!(q("forecast").contains(&"weather"));
        assert!(
            !q("remove file").contains(&"remove"),
            "words already in the query are not added"
        );
        assert!(q("pineapple").is_empty());
    }
}
