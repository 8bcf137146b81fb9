//! A saved skill as an Agent Skill, the format the MCP Skills extension serves: the names, the
//! `skill://` URIs and the files (`SKILL.md` and the code) of a stored skill. Pure: the MCP layer
//! reads the store, sends the texts through the privacy path and hands them in here.
//!
//! # Why it is built this way
//!
//! * **Two naming rules meet.** A store name is a Python identifier (`csv_to_dicts`); an Agent
//!   Skills name is lowercase letters, digits and single hyphens (`csv-to-dicts`), and it must be
//!   the last segment of the skill's URI. A store name of lowercase words joined by single
//!   underscores maps one to one onto such a name (each `_` a `-`); every other store name
//!   (capitals, a leading, trailing or doubled underscore) has no faithful Agent Skills name and
//!   is not published ([`agent_name`] says `None`). Mapping it anyway (lowercasing, say) would let
//!   two skills claim one URI, and a client could not tell which it was shown.
//! * **Allowlist before any path.** A URI from a client is parsed by [`parse_uri`]: exactly
//!   `skill://NAME/FILE`, with `NAME` checked against the Agent Skills rule, turned back into the
//!   store name and checked again by [`super::validate_name`], and `FILE` one of the two files a
//!   skill has. Nothing else reaches the store, so no URI can name a path of the host.
//! * **Frontmatter that any YAML reader reads the same.** The extension requires the `frontmatter`
//!   of `skills/list` to equal the YAML at the top of `SKILL.md`. Every value is therefore
//!   written as a double-quoted scalar with JSON-compatible escapes for whatever YAML would read
//!   differently (control characters, line separators, the byte-order mark), and the description
//!   is cut to the 1024 characters the Agent Skills rule allows, or replaced by a sentence when it
//!   is empty.
//! * **Two files.** `SKILL.md` says what the skill does and how to use it (`from skills import
//!   NAME` in `execute_code`: the code runs in the sandbox, not on the client's host); `NAME.py`
//!   is the code as `load_skill` returns it.

use super::name::{MAX_NAME_LEN, PYTHON_KEYWORDS, validate_name};

/// The URI scheme of published skills.
pub const SCHEME: &str = "skill://";
/// The entry point of every skill.
pub const SKILL_MD: &str = "SKILL.md";
/// MIME type of `SKILL.md`.
pub const SKILL_MD_MIME: &str = "text/markdown";
/// MIME type of the code file.
pub const CODE_MIME: &str = "text/x-python";
/// Longest description the Agent Skills rule allows, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Why a URI names no published skill file. Each message says what a skill URI looks like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillUriError {
    #[error(
        "{uri:?} is not a skill resource: skill URIs look like skill://NAME/SKILL.md (skills/list shows them)"
    )]
    NotSkill { uri: String },
    #[error(
        "no skill is served at {uri:?}: {reason}. Skill names here are lowercase words joined by hyphens, one per saved skill whose name is lowercase words joined by underscores (skills/list shows them)"
    )]
    BadName { uri: String, reason: String },
    #[error(
        "no skill is served at {uri:?}: no saved skill is named {store_name} (skills/list, or the list_skills tool, shows the saved skills)"
    )]
    NotFound { uri: String, store_name: String },
    #[error(
        "skill {name} has no file {file:?}: its files are {SKILL_MD} and {code} (skills/get lists them)"
    )]
    NoSuchFile {
        name: String,
        file: String,
        code: String,
    },
}

/// The Agent Skills name of the stored skill `store_name`, or `None` when it has none: the store
/// name must be lowercase ASCII words of letters and digits joined by single underscores.
pub fn agent_name(store_name: &str) -> Option<String> {
    validate_name(store_name).ok()?;
    let words_ok = store_name.split('_').all(|word| {
        !word.is_empty()
            && word
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    words_ok.then(|| store_name.replace('_', "-"))
}

/// The store name of the Agent Skills name `name`, or why there is none.
fn store_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("the name is longer than {MAX_NAME_LEN} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!("the name contains {c:?}"));
    }
    if name.split('-').any(str::is_empty) {
        return Err("a hyphen starts or ends the name, or two follow each other".into());
    }
    // The store's own rule after the Agent Skills one.
    if name.as_bytes()[0].is_ascii_digit() {
        return Err("the name starts with a digit".into());
    }
    let stored = name.replace('-', "_");
    if PYTHON_KEYWORDS.contains(&stored.as_str()) {
        return Err("the name is a Python keyword".into());
    }
    validate_name(&stored).map_err(|e| e.to_string())?;
    Ok(stored)
}

/// The file of a skill a URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillFile {
    SkillMd,
    Code,
}

/// A skill file a client asked for: the skill under both names, and which file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillAddress {
    /// The Agent Skills name, as in the URI.
    pub name: String,
    /// The name in the store (and in `from skills import NAME`).
    pub store_name: String,
    pub file: SkillFile,
}

/// Whether `uri` is in the scheme of published skills (it may still name nothing).
pub fn is_skill_uri(uri: &str) -> bool {
    uri.starts_with(SCHEME)
}

/// The URI of the skill's `SKILL.md`.
pub fn skill_md_uri(name: &str) -> String {
    format!("{SCHEME}{name}/{SKILL_MD}")
}

/// The file name of the skill's code.
pub fn code_file(store_name: &str) -> String {
    format!("{store_name}.py")
}

/// The URI of the skill's code.
pub fn code_uri(name: &str, store_name: &str) -> String {
    format!("{SCHEME}{name}/{}", code_file(store_name))
}

/// The skill file `uri` names: `skill://NAME/SKILL.md` or `skill://NAME/STORE_NAME.py`, nothing
/// else (no other segments, no query, no percent-encoding: the URIs this server gives out have
/// none).
pub fn parse_uri(uri: &str) -> Result<SkillAddress, SkillUriError> {
    let not_skill = || SkillUriError::NotSkill { uri: uri.into() };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(not_skill)?;
    let (name, file) = rest.split_once('/').ok_or_else(not_skill)?;
    let store_name = store_name(name).map_err(|reason| SkillUriError::BadName {
        uri: uri.into(),
        reason,
    })?;
    let file = if file == SKILL_MD {
        SkillFile::SkillMd
    } else if file == code_file(&store_name) {
        SkillFile::Code
    } else {
        return Err(SkillUriError::NoSuchFile {
            name: name.into(),
            file: file.into(),
            code: code_file(&store_name),
        });
    };
    Ok(SkillAddress {
        name: name.into(),
        store_name,
        file,
    })
}

/// What a published skill is made of, its texts already through the privacy path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSource<'a> {
    pub store_name: &'a str,
    pub description: &'a str,
    pub code: &'a str,
    pub version: u64,
}

/// The frontmatter of a published `SKILL.md`: name, description, and string metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    /// `metadata` of the Agent Skills format: string keys to string values.
    pub metadata: Vec<(&'static str, String)>,
}

/// A published skill: its names and the texts of its two files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSkill {
    pub store_name: String,
    pub frontmatter: Frontmatter,
    pub skill_md: String,
    pub code: String,
}

impl AgentSkill {
    /// The skill `source` describes, or `None` when its store name has no Agent Skills name.
    pub fn render(source: &SkillSource<'_>) -> Option<Self> {
        let name = agent_name(source.store_name)?;
        let frontmatter = Frontmatter {
            name,
            description: short_description(source.store_name, source.description),
            metadata: vec![
                ("python-name", source.store_name.to_owned()),
                ("version", source.version.to_string()),
            ],
        };
        let skill_md = skill_md(&frontmatter, source);
        Some(Self {
            store_name: source.store_name.to_owned(),
            frontmatter,
            skill_md,
            code: source.code.to_owned(),
        })
    }

    /// The Agent Skills name.
    pub fn name(&self) -> &str {
        &self.frontmatter.name
    }

    pub fn skill_md_uri(&self) -> String {
        skill_md_uri(self.name())
    }

    pub fn code_uri(&self) -> String {
        code_uri(self.name(), &self.store_name)
    }

    /// The text of `file`.
    pub fn text(&self, file: SkillFile) -> &str {
        match file {
            SkillFile::SkillMd => &self.skill_md,
            SkillFile::Code => &self.code,
        }
    }
}

/// The frontmatter's description: the saved one (trimmed), cut to the Agent Skills limit, or a
/// sentence naming the function when none was saved (the field may not be empty).
fn short_description(store_name: &str, description: &str) -> String {
    let description = description.trim();
    if description.is_empty() {
        return format!(
            "The saved Python function {store_name}; in execute_code, `from skills import {store_name}`."
        );
    }
    crate::text::cut_chars(description, MAX_DESCRIPTION_CHARS - 1)
}

fn skill_md(frontmatter: &Frontmatter, source: &SkillSource<'_>) -> String {
    let name = source.store_name;
    let mut md = String::from("---\n");
    md.push_str(&format!("name: {}\n", yaml_string(&frontmatter.name)));
    md.push_str(&format!(
        "description: {}\n",
        yaml_string(&frontmatter.description)
    ));
    md.push_str("metadata:\n");
    for (key, value) in &frontmatter.metadata {
        md.push_str(&format!("  {key}: {}\n", yaml_string(value)));
    }
    md.push_str("---\n\n");
    md.push_str(&format!("# {name}\n\n"));
    let description = source.description.trim();
    if !description.is_empty() {
        md.push_str(description);
        md.push_str("\n\n");
    }
    md.push_str(&format!(
        "A Python function saved in this server's skills store (version {version}). It runs in \
         this server's sandbox, through its `execute_code` tool, not on your machine. In the code \
         you pass to `execute_code`:\n\n```python\nfrom skills import {name}\n```\n\n\
         Its source is [{file}]({file}), beside this file; code can also read it with \
         `load_skill(\"{name}\")`. To change the skill, call `save_skill` with the name \
         `{name}`: the earlier versions are kept.\n",
        version = source.version,
        file = code_file(name),
    ));
    md
}

/// `value` as a YAML double-quoted scalar whose escapes are JSON's too: every reader, YAML 1.1 or
/// 1.2, reads back exactly `value`.
pub fn yaml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            // Control characters (C0, DEL, C1 with NEL), line and paragraph separators that
            // YAML 1.1 folds, the byte-order mark, and the non-characters YAML refuses.
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercase_words_map_to_hyphenated_names() {
        assert_eq!(agent_name("csv_to_dicts").as_deref(), Some("csv-to-dicts"));
        assert_eq!(agent_name("top_n").as_deref(), Some("top-n"));
        assert_eq!(agent_name("v2_parse").as_deref(), Some("v2-parse"));
        assert_eq!(agent_name("x").as_deref(), Some("x"));
    }

    #[test]
    fn names_without_a_faithful_agent_name_are_not_published() {
        for name in [
            "CamelCase",
            "_private",
            "trailing_",
            "double__under",
            "ABC",
            "a_B",
        ] {
            assert_eq!(agent_name(name), None, "{name}");
        }
        // Not a store name at all.
        for name in ["", "1abc", "class", "a-b", "../x", "é"] {
            assert_eq!(agent_name(name), None, "{name}");
        }
    }

    #[test]
    fn every_published_name_parses_back_to_its_store_name() {
        for stored in ["csv_to_dicts", "x", "a1_b2_c3", &"a".repeat(64)] {
            let name = agent_name(stored).unwrap();
            let address = parse_uri(&skill_md_uri(&name)).unwrap();
            assert_eq!(address.store_name, stored);
            assert_eq!(address.file, SkillFile::SkillMd);
            let address = parse_uri(&code_uri(&name, stored)).unwrap();
            assert_eq!((address.name, address.file), (name, SkillFile::Code));
        }
    }

    #[test]
    fn uris_that_name_nothing_are_refused_before_the_store() {
        let cases: &[(&str, &str)] = &[
            ("workspace:///x", "is not a skill resource"),
            ("skill://", "is not a skill resource"),
            ("skill://top-n", "is not a skill resource"),
            ("skill://Top-N/SKILL.md", "contains 'T'"),
            ("skill://top_n/SKILL.md", "contains '_'"),
            ("skill://-top/SKILL.md", "a hyphen starts"),
            ("skill://top--n/SKILL.md", "two follow each other"),
            ("skill://../SKILL.md", "contains '.'"),
            ("skill://%2e%2e/SKILL.md", "contains '%'"),
            ("skill://1abc/SKILL.md", "starts with a digit"),
            ("skill://class/SKILL.md", "Python keyword"),
            ("skill:///SKILL.md", "the name is empty"),
            ("skill://top-n/top-n.py", "has no file \"top-n.py\""),
            ("skill://top-n/../top_n.py", "has no file"),
            ("skill://top-n/SKILL.md?x=1", "has no file"),
            ("skill://top-n/sub/SKILL.md", "has no file"),
        ];
        for (uri, words) in cases {
            let error = parse_uri(uri).unwrap_err().to_string();
            assert!(error.contains(words), "{uri}: {error}");
        }
        let long = format!("skill://{}/SKILL.md", "a".repeat(65));
        assert!(parse_uri(&long).unwrap_err().to_string().contains("longer"));
    }

    fn source<'a>(description: &'a str, code: &'a str) -> SkillSource<'a> {
        SkillSource {
            store_name: "csv_to_dicts",
            description,
            code,
            version: 3,
        }
    }

    #[test]
    fn skill_md_has_the_frontmatter_and_says_how_to_use_the_skill() {
        let skill =
            AgentSkill::render(&source("Parse CSV text into dicts", "def f(): pass\n")).unwrap();
        assert_eq!(skill.skill_md_uri(), "skill://csv-to-dicts/SKILL.md");
        assert_eq!(skill.code_uri(), "skill://csv-to-dicts/csv_to_dicts.py");
        assert!(
            skill.skill_md.starts_with(
                "---\nname: \"csv-to-dicts\"\ndescription: \"Parse CSV text into dicts\"\n\
                 metadata:\n  python-name: \"csv_to_dicts\"\n  version: \"3\"\n---\n\n# csv_to_dicts\n"
            ),
            "{}",
            skill.skill_md
        );
        assert!(skill.skill_md.contains("from skills import csv_to_dicts"));
        assert!(
            skill
                .skill_md
                .contains("[csv_to_dicts.py](csv_to_dicts.py)")
        );
        assert_eq!(skill.text(SkillFile::Code), "def f(): pass\n");
    }

    #[test]
    fn an_empty_description_becomes_a_sentence_and_a_long_one_is_cut() {
        let skill = AgentSkill::render(&source("  ", "")).unwrap();
        assert!(
            skill
                .frontmatter
                .description
                .contains("from skills import csv_to_dicts")
        );
        let long = "é".repeat(3000);
        let skill = AgentSkill::render(&source(&long, "")).unwrap();
        assert_eq!(
            skill.frontmatter.description.chars().count(),
            MAX_DESCRIPTION_CHARS
        );
        assert!(skill.frontmatter.description.ends_with('…'));
        // The body keeps the whole description.
        assert!(skill.skill_md.contains(&long));
    }

    #[test]
    fn yaml_strings_escape_what_yaml_would_read_differently() {
        assert_eq!(yaml_string("plain: text # x"), "\"plain: text # x\"");
        assert_eq!(yaml_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(yaml_string("l1\nl2\tx"), r#""l1\nl2\tx""#);
        assert_eq!(
            yaml_string("\u{0}\u{7f}\u{85}\u{2028}\u{feff}\u{ffff}"),
            r#""\u0000\u007f\u0085\u2028\ufeff\uffff""#
        );
        assert_eq!(yaml_string("émoji 🦀"), "\"émoji 🦀\"");
        // The escapes are JSON's, so a JSON reader agrees with a YAML one.
        let tricky = "a\"\\\n\t\u{1}\u{2029}é🦀";
        let back: String = serde_json::from_str(&yaml_string(tricky)).unwrap();
        assert_eq!(back, tricky);
    }
}
