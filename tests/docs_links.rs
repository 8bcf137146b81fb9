//! The documentation's links hold: every relative link between README.md, ARCHITECTURE.md,
//! CONTRIBUTING.md, SECURITY.md and `docs/*.md` names a file that exists, and a `#anchor` names
//! a heading of its target as GitHub makes anchors (lowercased, spaces to `-`, punctuation other
//! than `-` and `_` removed, a repeated heading's anchor suffixed `-1`, `-2`). Pages move detail
//! between each other as they grow, and a link left pointing at the old place is a dead end
//! nobody sees in review. Beside it, README.md's length: it is the user's first page, and detail
//! belongs on the `docs/` page of its topic. Plain text reading, no engine.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// README.md's bound, in lines.
const README_MAX_LINES: usize = 450;

/// The pages whose links are checked, besides every `docs/*.md`.
const TOP_PAGES: [&str; 4] = [
    "README.md",
    "ARCHITECTURE.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
];

/// What a check of a set of pages found.
#[derive(Debug, Default)]
struct Report {
    /// Relative links checked.
    links: usize,
    /// Of them, links with a `#anchor` checked against a page's headings.
    anchors: usize,
    /// One line per broken link: page, line, target, what is wrong.
    problems: Vec<String>,
}

/// For each line of a page, whether it belongs to a fenced code block (its fences included):
/// a `#` line there is a shell comment, not a heading, and a `](` is code.
fn fenced_lines(text: &str) -> Vec<bool> {
    let mut fence: Option<(char, usize)> = None;
    let mut fenced = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indented = line.len() - trimmed.len() > 3;
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match fence {
            Some((c, n)) => {
                if marker == Some(c) && run >= n && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
                fenced.push(true);
            }
            None if !indented && run >= 3 => {
                fence = marker.map(|c| (c, run));
                fenced.push(true);
            }
            None => fenced.push(false),
        }
    }
    fenced
}

/// The page's prose: fenced blocks and inline code spans blanked, newlines kept so that line
/// numbers hold.
fn prose(text: &str) -> String {
    let fenced = fenced_lines(text);
    let mut out = String::with_capacity(text.len());
    for (line, fenced) in text.lines().zip(fenced) {
        if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    blank_code_spans(&out)
}

/// Inline code spans blanked: a run of backticks closes at the next run of the same length in
/// the same paragraph (a span may wrap over lines, never over a blank line).
fn blank_code_spans(text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let run_at = |chars: &[char], at: usize| chars[at..].iter().take_while(|c| **c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let open = run_at(&chars, i);
        let mut j = i + open;
        let mut close = None;
        while j < chars.len() && !(chars[j] == '\n' && chars.get(j + 1) == Some(&'\n')) {
            if chars[j] != '`' {
                j += 1;
                continue;
            }
            let run = run_at(&chars, j);
            if run == open {
                close = Some(j + run);
                break;
            }
            j += run;
        }
        let Some(end) = close else {
            i += open;
            continue;
        };
        for c in &mut chars[i..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = end;
    }
    chars.into_iter().collect()
}

/// GitHub's anchor for a heading's text: a link gives its text, code its content; lowercased;
/// letters, digits, `-`, `_` and spaces kept, each space made `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find('[') {
        let Some(mid) = rest[start..].find("](").map(|m| start + m) else {
            break;
        };
        let Some(end) = rest[mid..].find(')').map(|e| mid + e) else {
            break;
        };
        text.push_str(&rest[..start]);
        text.push_str(&rest[start + 1..mid]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text of an ATX heading (`## Text`, an optional closing run of `#` dropped).
fn atx_heading(line: &str) -> Option<&str> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let hashes = trimmed.chars().take_while(|c| *c == '#').count();
    let rest = &trimmed[hashes..];
    if !(1..=6).contains(&hashes) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim();
    let without_closing = rest.trim_end_matches('#');
    Some(
        if without_closing.is_empty() || without_closing.ends_with(' ') {
            without_closing.trim()
        } else {
            rest
        },
    )
}

/// The text of a setext heading: a paragraph line underlined with `=` or `-` alone.
fn setext_heading<'a>(line: &'a str, next: Option<&str>) -> Option<&'a str> {
    let under = next?.trim();
    let underline =
        !under.is_empty() && (under.bytes().all(|b| b == b'=') || under.bytes().all(|b| b == b'-'));
    let text = line.trim();
    let block_start = text.starts_with(['#', '|', '-', '*', '>']);
    (underline && !text.is_empty() && !block_start).then_some(text)
}

/// Every anchor a page's headings make, a repeated one suffixed `-1`, `-2` as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let lines: Vec<&str> = text.lines().collect();
    let fenced = fenced_lines(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        if fenced[i] {
            continue;
        }
        let next = lines
            .get(i + 1)
            .filter(|_| !fenced.get(i + 1).copied().unwrap_or(true));
        let Some(heading) = atx_heading(line).or_else(|| setext_heading(line, next.copied()))
        else {
            continue;
        };
        let base = slug(&heading.replace('`', ""));
        let count = seen.entry(base.clone()).or_insert(0);
        anchors.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    anchors
}

/// Every relative link of a page, inline (`[text](target)`, images too) or a reference
/// definition (`[label]: target`), with its line; links with a scheme (`https:`, `mailto:`) are
/// left out.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let prose = prose(text);
    let mut links = Vec::new();
    for (i, line) in prose.lines().enumerate() {
        let mut targets: Vec<&str> = line
            .match_indices("](")
            .filter_map(|(at, _)| line[at + 2..].split(')').next())
            .collect();
        let definition = line
            .trim_start()
            .strip_prefix('[')
            .and_then(|l| l.split_once("]:"));
        targets.extend(definition.map(|(_, target)| target));
        for target in targets {
            let target = target.trim().trim_start_matches('<');
            let target = target.split([' ', '>']).next().unwrap_or("");
            let scheme = target.split_once(':').is_some_and(|(s, _)| {
                !s.is_empty()
                    && !s.contains(['/', '#'])
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
            });
            if !target.is_empty() && !scheme {
                links.push((i + 1, target.to_string()));
            }
        }
    }
    links
}

/// `base/rel` with `.` and `..` resolved without touching the file system.
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut path = PathBuf::new();
    for part in base.join(rel).components() {
        match part {
            Component::ParentDir => {
                path.pop();
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    path
}

/// Checks the links of `pages` (paths relative to `root`).
fn check(root: &Path, pages: &[PathBuf]) -> Report {
    let mut report = Report::default();
    let mut anchor_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for page in pages {
        let text = fs::read_to_string(root.join(page))
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", page.display()));
        let dir = page.parent().unwrap_or(Path::new(""));
        for (line, target) in relative_links(&text) {
            report.links += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if file.is_empty() {
                page.clone()
            } else {
                join(dir, file)
            };
            let at = format!("{}:{line}: `{target}`", page.display());
            if !root.join(&file).exists() {
                report
                    .problems
                    .push(format!("{at}: {} does not exist", file.display()));
                continue;
            }
            if anchor.is_empty() || file.extension().is_none_or(|e| e != "md") {
                continue;
            }
            report.anchors += 1;
            let known = anchor_cache.entry(file.clone()).or_insert_with(|| {
                anchors(&fs::read_to_string(root.join(&file)).unwrap_or_default())
            });
            if !known.contains(anchor) {
                report.problems.push(format!(
                    "{at}: no heading of {} makes the anchor #{anchor} (its anchors: {})",
                    file.display(),
                    known.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    report
}

/// README.md, ARCHITECTURE.md, CONTRIBUTING.md, SECURITY.md and every `docs/*.md`.
fn project_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = TOP_PAGES.iter().map(PathBuf::from).collect();
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| PathBuf::from("docs").join(entry.expect("docs/ entry").file_name()))
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_relative_link_and_anchor_between_the_docs_resolves() {
    let root = root();
    let pages = project_pages(&root);
    assert!(
        pages.len() > TOP_PAGES.len(),
        "no docs/*.md page found under {}",
        root.display()
    );
    let report = check(&root, &pages);
    // A reader that found nothing would pass: the pages link each other by the dozen.
    assert!(
        report.links >= 50 && report.anchors >= 25,
        "too few links read: {report:?}"
    );
    assert!(
        report.problems.is_empty(),
        "{} broken link(s); fix the link, or the heading it points at:\n{}",
        report.problems.len(),
        report.problems.join("\n")
    );
}

#[test]
fn readme_stays_within_its_length() {
    let readme = fs::read_to_string(root().join("README.md")).expect("README.md is readable");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, over {README_MAX_LINES}: move the detail to the docs/ page of \
         its topic and link it from README"
    );
}

#[test]
fn anchors_follow_githubs_slugs() {
    let page = "# Title\n\n## Plans: writes approved as one\n## One `execute_code` call\n\
                ## Personal data: where each upstream's values may go\n## MCP 2026-07-28: tasks ##\n\
                ## Speed\n### Speed\n## Speed\n```sh\n# not a heading\n```\nSetext\n------\n\
                ## [Linked](x.md) text\n    # indented code\n";
    let expected = [
        "title",
        "plans-writes-approved-as-one",
        "one-execute_code-call",
        "personal-data-where-each-upstreams-values-may-go",
        "mcp-2026-07-28-tasks",
        "speed",
        "speed-1",
        "speed-2",
        "setext",
        "linked-text",
    ];
    let got = anchors(page);
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(got, expected);
}

#[test]
fn a_broken_file_or_anchor_is_reported_and_code_is_not_read() {
    let root = std::env::temp_dir().join(format!("cem-docs-links-{}", std::process::id()));
    fs::create_dir_all(root.join("docs")).unwrap();
    let readme = "# Top\n\n## Use it\n\nSee [a](docs/a.md#how-it-works), [gone](docs/gone.md),\n\
                  [bad](docs/a.md#how-it-work), [self](#use-it), [self bad](#use),\n\
                  [web](https://example.com/x#y), `[code](docs/none.md)` and\n\
                  ```\n[fenced](docs/none.md)\n```\n[dir](docs/) [up](docs/../README.md#top)\n";
    fs::write(root.join("README.md"), readme).unwrap();
    fs::write(
        root.join("docs/a.md"),
        "# A\n\n## How it works\n\nBack: [top](../README.md#top).\n",
    )
    .unwrap();
    let report = check(
        &root,
        &[PathBuf::from("README.md"), PathBuf::from("docs/a.md")],
    );
    fs::remove_dir_all(&root).unwrap();
    let problems: Vec<&str> = report
        .problems
        .iter()
        .map(|p| p.split(": ").nth(1).unwrap_or(p))
        .collect();
    assert_eq!(
        problems,
        ["`docs/gone.md`", "`docs/a.md#how-it-work`", "`#use`"],
        "{report:?}"
    );
    assert_eq!((report.links, report.anchors), (8, 6), "{report:?}");
}
