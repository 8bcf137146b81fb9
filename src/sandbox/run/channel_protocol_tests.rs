//! docs/frame-protocol.md against the Rust frames and the Python files (read at run time from
//! the crate's root): a frame, a field or a call added on one side only fails here.

use super::*;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};

const DOC: &str = "docs/frame-protocol.md";
const TO: &str = "server → harness";
const FROM: &str = "harness → server";
type Set = BTreeSet<String>;
type Frames = BTreeMap<String, Set>; // type -> fields (`a.b`: key b of object a)

fn read(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What the first group of `pattern` matches in `text`.
fn found(pattern: &str, text: &str) -> Set {
    let re = Regex::new(pattern).unwrap();
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// The cells of the table rows in the doc's section `heading` (cell 0 is empty).
fn rows(heading: &str) -> Vec<Vec<String>> {
    let (doc, heading) = (read(DOC), format!("\n## {heading}\n"));
    let section = doc.split(&heading).nth(1).expect(&heading);
    let lines = section.split("\n## ").next().unwrap().lines();
    let cells = |l: &str| l.split('|').map(|c| c.trim().to_string()).collect();
    lines.filter(|l| l.starts_with("| `")).map(cells).collect()
}

fn documented(direction: &str) -> Frames {
    let mut frames = Frames::new();
    for cells in rows("Frames") {
        assert!([TO, FROM].contains(&cells[2].as_str()), "{cells:?}");
        let name = found("`(.+)`", &cells[1]).pop_first().unwrap();
        let fields = found("`([^`]+)`", &cells[3]);
        let twice = cells[2] == direction && frames.insert(name, fields).is_some();
        assert!(!twice, "{cells:?} twice");
    }
    frames
}

/// Replaces field `field` of `frame` with the keys `nested` serializes to, as `field.key`.
fn nest(frames: &mut Frames, frame: &str, field: &str, nested: impl Serialize) {
    let fields = frames.get_mut(frame).unwrap();
    assert!(fields.remove(field), "{frame} has no {field}");
    for key in serde_json::to_value(nested)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
    {
        fields.insert(format!("{field}.{key}"));
    }
}

/// Each variant's tag and fields, destructured without `..`: a new one must be named here.
macro_rules! fields {
    ($enum:ident:
     $($tag:literal => $v:ident $({$($f:ident),*})? $(($in:ident {$($g:ident),*}))?),*)
    => {{
        #[allow(dead_code)]
        fn exhaustive(frame: $enum) {
            match frame { $($enum::$v $({$($f: _),*})? $(($in {$($g: _),*}))? => {})* }
        }
        Frames::from([$(($tag.to_string(), [$($(stringify!($f)),*)? $($(stringify!($g)),*)?]
            .iter().map(|f: &&str| f.to_string()).collect())),*])
    }};
}

fn to_harness() -> Frames {
    let mut frames = fields! { ToHarness:
        "job" => Job {
            code, context_vars, limits, edge_bytes, servers, packages, session, plan, egress
        },
        "restore" => Restore { modules, vars, dir },
        "state" => State { data },
        "state_end" => StateEnd { bytes },
        "reply" => Reply { id, result, error }
    };
    let limits = HarnessLimits {
        max_output_bytes: 0,
        max_result_bytes: 0,
        max_images: 0,
    };
    nest(&mut frames, "job", "limits", limits);
    let session = SessionLimits { max_bytes: 0 };
    nest(&mut frames, "job", "session", session);
    nest(&mut frames, "job", "plan", PlanSpec::default());
    nest(
        &mut frames,
        "job",
        "egress",
        super::EgressJob { http: false },
    );
    frames
}

/// Serde's own list of tags must be the same as the one here.
fn from_harness() -> Frames {
    let mut frames = fields! { FromHarness:
        "output" => Output { stream, data, truncated, dropped_bytes },
        "call" => Call { id, method, params },
        "image" => Image { source, data, dropped },
        "link" => Link { path, description },
        "done" => Done(DoneFrame {
            success, result, result_truncated, error, error_type, traceback, imports, state
        }),
        "plan" => Plan { server, tool, arguments },
        "plan_options" => PlanOptions { stop_on_error },
        "plan_refused" => PlanRefused { reason },
        "ready" => Ready,
        "loaded" => Loaded,
        "blob" => Blob { bytes },
        "state_end" => StateEnd { bytes, manifest }
    };
    nest(&mut frames, "done", "state", StateReport::default());
    let unknown = serde_json::from_str::<FromHarness>(r#"{"type":"?"}"#).unwrap_err();
    let tags = found("`(\\w+)`", &unknown.to_string().replace("`?`", ""));
    same(tags, frames.keys().cloned().collect(), "serde's tags");
    frames
}

/// What Python sends (flat dict literals opening with the type; keys set later on a
/// variable holding one, or named after it), the types it compares frames' with (reads),
/// and the methods it calls.
fn python() -> (Frames, Set, Set) {
    let literal = Regex::new(r#"(?:(\w+) = )?\{"type": "(\w+)"([^}]*)\}"#).unwrap();
    let later = Regex::new(r#"(\w+)\["(\w+)"\] = "#).unwrap();
    let (mut sent, mut read_types, mut methods) = (Frames::new(), Set::new(), Set::new());
    for file in ["harness.py", "cem_helpers.py", "cem_matplotlib.py"] {
        let text = read(&format!("images/python/{file}"));
        let mut holders = BTreeMap::new();
        for c in literal.captures_iter(&text) {
            let keys = found(r#""(\w+)":"#, &c[3]);
            sent.entry(c[2].to_string()).or_default().extend(keys);
            if let Some(var) = c.get(1) {
                holders.insert(var.as_str().to_string(), c[2].to_string());
            }
        }
        for c in later.captures_iter(&text) {
            let frame = holders.get(&c[1]).cloned().unwrap_or(c[1].to_string());
            if let Some(fields) = sent.get_mut(&frame) {
                fields.insert(c[2].to_string());
            }
        }
        let mut typed = vec![r#"\.get\("type"\)"#.to_string()];
        typed.extend(found(r#"(\w+) = [\w.]+\.get\("type"\)"#, &text));
        let compared = format!(r#"(?:{}) [!=]= "(\w+)""#, typed.join("|\\b"));
        read_types.extend(found(&compared, &text));
        methods.extend(found(r#"(?:_server_call|\.call)\("(\w+)""#, &text));
    }
    (sent, read_types, methods)
}

#[track_caller]
fn same<T: PartialEq + std::fmt::Debug>(code: T, doc: T, what: &str) {
    assert_eq!(code, doc, "{what}: the code's (left), then {DOC}'s (right)");
}

/// Only the top-level names of each frame's fields.
fn top_level(mut frames: Frames) -> Frames {
    let top = |f: &String| f.split('.').next().unwrap().to_string();
    frames
        .values_mut()
        .for_each(|f| *f = f.iter().map(top).collect());
    frames
}

#[test]
fn rust_and_python_frames_and_calls_are_the_documented_ones() {
    same(to_harness(), documented(TO), TO);
    same(from_harness(), documented(FROM), FROM);
    let (sent, read_types, methods) = python();
    same(sent, top_level(documented(FROM)), "Python sends");
    let (to, harness) = (documented(TO), read("images/python/harness.py"));
    same(read_types, to.keys().cloned().collect(), "Python reads");
    for (frame, name) in to.iter().flat_map(|(t, f)| f.iter().map(move |f| (t, f))) {
        let quoted = |n: &&str| harness.contains(&format!("\"{n}\""));
        let unread = name.split('.').find(|n| !quoted(n));
        assert_eq!(unread, None, "harness.py never reads {frame}'s {name}");
    }
    let mut calls = Set::new();
    for cells in rows("Calls") {
        calls.extend(found("`(.+)`", &cells[1]));
    }
    assert!(calls.remove("ping"), "ping: the server's own, not Python's");
    same(methods, calls, "Python's calls");
}
