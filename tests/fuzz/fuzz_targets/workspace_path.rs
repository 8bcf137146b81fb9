//! Workspace paths: `validate_relative_path` / `validate_relative_subpath` against a written-out
//! specification, and a real `Workspace` driven by a script of writes, reads, deletes and
//! listings on fuzzed names, checked against an in-memory model of the tree. After every input
//! the tree on disk must be exactly the model's, and nothing beside the workspace root may have
//! changed.
//!
//! Input: lines `<op><path>`, op one of `w` (write a small file), `W` (write one over the size
//! limit), `r` (read), `d` (delete), `l` (list). Every line, and the whole input, is also
//! checked against the validation specification.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use code_execution_mcp::workspace::{
    LIST_MAX_DEPTH, MAX_NAME_LEN, Workspace, WorkspaceLimits, validate_relative_path,
    validate_relative_subpath,
};
use libfuzzer_sys::fuzz_target;

const MAX_FILE: u64 = 64;
const MAX_LIST: usize = 16;
const MAX_PATH: usize = 1024;
const MAX_OPS: usize = 32;
/// Entries a listing examines at most: `max(max_list_entries * 10, 1000)`.
const LIST_SCAN_BUDGET: usize = 1000;
const CANARY: &[u8] = b"CANARY: outside the workspace";

struct Fixture {
    base: PathBuf,
    root: PathBuf,
    ws: Workspace,
}

/// `<tmp>/cem-fuzz-ws-<pid>/{ws,outside/secret}`, on tmpfs when there is one (writes fsync).
static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let tmp = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    // Fixtures of earlier runs whose process is gone.
    for e in fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("cem-fuzz-ws-")
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = fs::remove_dir_all(e.path());
        }
    }
    let base = tmp.join(format!("cem-fuzz-ws-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(base.join("outside")).unwrap();
    fs::write(base.join("outside/secret"), CANARY).unwrap();
    let limits = WorkspaceLimits {
        max_file_bytes: MAX_FILE,
        max_list_entries: MAX_LIST,
        max_path_len: MAX_PATH,
        ..WorkspaceLimits::default()
    };
    let ws = Workspace::open(&base.join("ws"), limits).unwrap();
    Fixture {
        root: ws.root_path().to_path_buf(),
        base,
        ws,
    }
});

/// The specification of validation, written independently of the implementation.
fn spec(s: &str, max_len: usize, file: bool) -> Option<Vec<&str>> {
    if (file && s.is_empty())
        || s.len() > max_len
        || s.chars().any(|c| c == '\0' || c == '\\' || c.is_control())
        || s.starts_with('/')
    {
        return None;
    }
    let comps: Vec<&str> = s
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if s.split('/').any(|c| c == "..") || comps.iter().any(|c| c.len() > MAX_NAME_LEN) {
        return None;
    }
    if file && comps.is_empty() {
        return None;
    }
    Some(comps)
}

fn check_validation(s: &str) {
    for max in [MAX_PATH, 16] {
        let got = validate_relative_path(s, max).ok();
        assert_eq!(
            got,
            spec(s, max, true),
            "validate_relative_path({s:?}, {max})"
        );
        let got = validate_relative_subpath(s, max).ok();
        assert_eq!(
            got,
            spec(s, max, false),
            "validate_relative_subpath({s:?}, {max})"
        );
        for c in got.into_iter().flatten() {
            assert!(!c.is_empty() && c != "." && c != ".." && !c.contains(['/', '\0', '\\']));
        }
    }
}

type Comps = Vec<String>;

#[derive(Default)]
struct Model {
    files: BTreeMap<Comps, Vec<u8>>,
    dirs: BTreeSet<Comps>,
}

impl Model {
    fn write_ok(&self, comps: &Comps, len: usize) -> bool {
        len as u64 <= MAX_FILE
            && !self.dirs.contains(comps)
            && !(1..comps.len()).any(|i| self.files.contains_key(&comps[..i]))
    }

    /// What a listing of `sub` returns: the files, whether it stops at the depth limit, and how
    /// many directory entries the walk examines (it gives up past its scan budget).
    fn listing(&self, sub: &Comps) -> (BTreeSet<String>, bool, usize) {
        let below = |c: &&Comps| c.len() > sub.len() && c.starts_with(sub);
        // `lost+found` at the root is examined but neither listed nor entered.
        let hidden = |c: &Comps| sub.is_empty() && c[0] == "lost+found";
        let reached = |c: &Comps| c.len() - sub.len() <= LIST_MAX_DEPTH + 1;
        let files = self
            .files
            .keys()
            .filter(below)
            .filter(|f| !hidden(f) && reached(f))
            .map(|f| f.join("/"))
            .collect();
        let deep = self
            .dirs
            .iter()
            .filter(below)
            .any(|d| !hidden(d) && d.len() - sub.len() > LIST_MAX_DEPTH);
        let examined = self
            .files
            .keys()
            .chain(&self.dirs)
            .filter(below)
            .filter(|c| reached(c) && !(hidden(c) && c.len() > 1))
            .count();
        (files, deep, examined)
    }
}

fn owned(comps: &[&str]) -> Comps {
    comps.iter().map(|c| c.to_string()).collect()
}

/// The tree under `dir` as it is on disk: directories and files with their contents.
fn scan(dir: &Path, prefix: &mut Comps, model: &mut Model) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e
            .file_name()
            .into_string()
            .expect("names written are UTF-8");
        prefix.push(name);
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            model.dirs.insert(prefix.clone());
            scan(&e.path(), prefix, model);
        } else {
            assert!(ft.is_file(), "{prefix:?} is neither a file nor a directory");
            model
                .files
                .insert(prefix.clone(), fs::read(e.path()).unwrap());
        }
        prefix.pop();
    }
}

fuzz_target!(|data: &[u8]| {
    let input = String::from_utf8_lossy(data);
    check_validation(&input);

    let fx = &*FIXTURE;
    let mut model = Model::default();
    for (i, line) in input.split('\n').take(MAX_OPS).enumerate() {
        let mut chars = line.chars();
        let Some(op) = chars.next() else { continue };
        let path = chars.as_str();
        check_validation(path);
        let valid = spec(path, MAX_PATH, true).map(|c| owned(&c));
        match op {
            'w' | 'W' => {
                let mut content: Vec<u8> = path.bytes().take(48).collect();
                content.push(i as u8);
                if op == 'W' {
                    content.resize(MAX_FILE as usize + 1 + i, b'x');
                }
                let got = fx.ws.write_file(path, &content);
                let want = valid
                    .as_ref()
                    .is_some_and(|c| model.write_ok(c, content.len()));
                assert_eq!(got.is_ok(), want, "write {path:?}: {got:?}");
                if let (Ok(n), Some(comps)) = (got, valid) {
                    assert_eq!(n, content.len() as u64);
                    let on_disk = fx.root.join(comps.join("/"));
                    assert_eq!(
                        fs::read(&on_disk).unwrap(),
                        content,
                        "{}",
                        on_disk.display()
                    );
                    for i in 1..comps.len() {
                        model.dirs.insert(comps[..i].to_vec());
                    }
                    model.files.insert(comps, content);
                }
            }
            'r' => {
                let got = fx.ws.read_file(path);
                let want = valid.as_ref().and_then(|c| model.files.get(c));
                match (got, want) {
                    (Ok(file), Some(content)) => assert_eq!(&file.bytes, content),
                    (Err(_), None) => {}
                    (got, want) => panic!("read {path:?}: {got:?}, want {want:?}"),
                }
            }
            'd' => {
                let got = fx.ws.delete_file(path);
                let want = valid.is_some_and(|c| model.files.remove(&c).is_some());
                assert_eq!(got.is_ok(), want, "delete {path:?}: {got:?}");
            }
            'l' => {
                let got = fx.ws.list_files(path);
                let sub = spec(path, MAX_PATH, false).map(|c| owned(&c));
                let sub = sub.filter(|s| s.is_empty() || model.dirs.contains(s));
                match (got, sub) {
                    (Ok(listing), Some(sub)) => {
                        let (want, deep, examined) = model.listing(&sub);
                        let listed: BTreeSet<String> = listing.files.iter().cloned().collect();
                        assert_eq!(listed.len(), listing.files.len(), "duplicates");
                        assert_eq!(listing.skipped, 0);
                        if want.len() > MAX_LIST || examined > LIST_SCAN_BUDGET {
                            assert!(listing.truncated);
                            assert!(listed.len() <= MAX_LIST);
                            if examined <= LIST_SCAN_BUDGET {
                                assert_eq!(listed.len(), MAX_LIST);
                            }
                            assert!(listed.is_subset(&want), "list {path:?}: {listed:?}");
                        } else {
                            assert_eq!(listed, want, "list {path:?}");
                            assert_eq!(listing.truncated, deep, "list {path:?}");
                        }
                        // Every listed path reads back through the tools.
                        for f in &listing.files {
                            assert!(fx.ws.read_file(f).is_ok(), "listed {f:?} does not read");
                        }
                    }
                    (Err(_), None) => {}
                    (got, sub) => panic!("list {path:?}: {got:?}, want {sub:?}"),
                }
            }
            _ => {}
        }
    }

    // The disk holds exactly the model's tree: nothing elsewhere, no temp file left.
    let mut disk = Model::default();
    scan(&fx.root, &mut Vec::new(), &mut disk);
    assert_eq!(disk.files, model.files);
    assert_eq!(disk.dirs, model.dirs);
    // Beside the root, nothing changed.
    let mut beside: Vec<String> = fs::read_dir(&fx.base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["outside", "ws"]);
    let outside: Vec<_> = fs::read_dir(fx.base.join("outside")).unwrap().collect();
    assert_eq!(outside.len(), 1);
    assert_eq!(fs::read(fx.base.join("outside/secret")).unwrap(), CANARY);

    // Empty the root for the next input (the workspace keeps its fd to the root itself).
    for e in fs::read_dir(&fx.root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            fs::remove_dir_all(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
    }
});
