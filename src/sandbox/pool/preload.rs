//! What pooled containers import before their job: a fixed list (`--preload pandas,numpy`),
//! nothing (`--preload none`), or, by default, the tenant's usual imports: what its recent code
//! imported.
//!
//! Why learned: importing numpy and pandas costs about a second of CPU per container. Paid by
//! every pooled container whether its code needs them or not, it made the default slower under
//! load than a plain `docker run`; never paid, every data call waits for the import. The
//! harness reports the modules each job's own code imported ([`Learned::record`]); every module
//! one of the recent executions imported is a usual import, and a share of the pool carries
//! them ([`Learned::keep`]): the share of recent executions that imported any, and at least one
//! container while there are any. Only while the calls being made ask for them, though: when
//! the latest call's code names none of them ([`Learned::asked`]), as in a burst of `print(1)`
//! calls right after data work, replacements start plain rather than import what nobody is
//! asking for. The rest of the pool starts plain, and an execution takes the container that
//! fits the imports its code names ([`code_imports`]): a data call finds pandas imported from
//! the second call that imports it on, and a `print(1)` never uses up (and so never makes the
//! pool pay again) a container that imported pandas for nothing. When the calls come faster
//! than a preloaded container gets ready, or executions wait for containers, the pool starts
//! plain ones instead (see `Pool::reserve`).

use std::collections::VecDeque;
use std::sync::Mutex;

/// Executions whose imports count.
const WINDOW: usize = 10;
/// Most modules preloaded.
const MAX_MODULES: usize = 8;

/// How the pool chooses its preload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preload {
    /// These modules, always.
    Fixed(Vec<String>),
    /// What recent executions imported.
    Learned,
}

/// The imports of recent executions.
#[derive(Debug, Default)]
pub struct Learned {
    recent: Mutex<VecDeque<Vec<String>>>,
    /// The top-level modules the latest execution's code names.
    last_asked: Mutex<Vec<String>>,
}

impl Learned {
    /// Notes what one execution's code imported (dotted module names).
    pub fn record(&self, imports: &[String]) {
        let mut recent = self.recent.lock().expect("preload lock");
        if recent.len() == WINDOW {
            recent.pop_front();
        }
        recent.push_back(imports.to_vec());
    }

    /// Notes the top-level modules an execution's code names ([`code_imports`]) as it asks
    /// for a container: the calls being made now.
    pub fn asked(&self, imports: &[String]) {
        *self.last_asked.lock().expect("preload lock") = imports.to_vec();
    }

    /// The usual imports: every module one of the recent executions imported, most used first
    /// (by first use on a tie), at most [`MAX_MODULES`].
    pub fn modules(&self) -> Vec<String> {
        let recent = self.recent.lock().expect("preload lock");
        let mut counts: Vec<(String, usize)> = Vec::new();
        for imports in recent.iter() {
            for module in imports {
                match counts.iter_mut().find(|(m, _)| m == module) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((module.clone(), 1)),
                }
            }
        }
        // Stable: equal counts keep the order of first use.
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts
            .into_iter()
            .take(MAX_MODULES)
            .map(|(m, _)| m)
            .collect()
    }

    /// How many of `target` pooled containers carry the usual imports: the share of recent
    /// executions that imported anything, rounded up (so at least one while there are any);
    /// none while the latest call's code names none of them.
    pub fn keep(&self, target: usize) -> usize {
        let recent = self.recent.lock().expect("preload lock");
        let asked = self.last_asked.lock().expect("preload lock");
        let wanted_now = (recent.iter().flatten()).any(|m| {
            asked
                .iter()
                .any(|a| m.split('.').next() == Some(a.as_str()))
        });
        if !wanted_now {
            return 0;
        }
        let importing = recent.iter().filter(|i| !i.is_empty()).count();
        (importing * target).div_ceil(recent.len().max(1))
    }
}

/// Most names taken from one job's code.
const MAX_CODE_IMPORTS: usize = 32;

/// The top-level modules a job's code names in its `import` and `from ... import` statements,
/// wherever they stand (a function's imports run when it is called). A cheap scan of the text,
/// not a parse: a name it misses only costs that job the import; relative imports name no
/// module of the pool's.
pub fn code_imports(code: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let statements = code.lines().flat_map(|line| line.split(';'));
    for statement in statements.map(str::trim) {
        let names: Vec<&str> = if let Some(rest) = statement.strip_prefix("import ") {
            rest.split(',').collect()
        } else if let Some(rest) = statement.strip_prefix("from ") {
            rest.split_whitespace().take(1).collect()
        } else {
            continue;
        };
        for name in names {
            let dotted = name.split_whitespace().next().unwrap_or("");
            let top = dotted.split('.').next().unwrap_or("");
            let is_name = top
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && top.chars().all(|c| c.is_alphanumeric() || c == '_');
            if is_name && !found.iter().any(|f| f == top) && found.len() < MAX_CODE_IMPORTS {
                found.push(top.to_string());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn what_recent_code_imported_is_usual_and_a_share_of_the_pool_carries_it() {
        let learned = Learned::default();
        assert!(learned.modules().is_empty(), "nothing learned");
        assert_eq!(learned.keep(4), 0);
        learned.record(&[]);
        learned.record(&names(&["pandas", "numpy"]));
        learned.asked(&names(&["numpy"]));
        assert_eq!(learned.modules(), names(&["pandas", "numpy"]));
        assert_eq!(learned.keep(4), 2, "1 of 2 executions: half of 4");
        learned.record(&names(&["json", "pandas"]));
        assert_eq!(learned.modules(), names(&["pandas", "numpy", "json"]));
        for _ in 0..7 {
            learned.record(&[]);
        }
        assert_eq!(learned.keep(4), 1, "2 of 10: still one ready");
        assert_eq!(learned.keep(16), 4);
    }

    #[test]
    fn code_that_imports_nothing_soon_gets_nothing_preloaded() {
        let learned = Learned::default();
        for _ in 0..WINDOW {
            learned.record(&names(&["pandas.core.frame"]));
        }
        learned.asked(&names(&["pandas"]));
        assert_eq!(learned.keep(4), 4);
        // The latest call names none of them: nothing more is preloaded for now.
        learned.asked(&[]);
        assert_eq!(learned.keep(4), 0);
        learned.asked(&names(&["json", "pandas"]));
        assert_eq!(learned.keep(4), 4);
        for _ in 0..WINDOW {
            learned.record(&[]);
        }
        assert!(learned.modules().is_empty());
        assert_eq!(learned.keep(4), 0);
    }

    #[test]
    fn a_jobs_imports_are_read_off_its_statements() {
        let code = "import pandas as pd, numpy\nfrom sklearn.linear_model import X\n\
            def f():\n    import json; import os.path\nfrom . import sibling\n\
            x = 'import nothing'\nimport pandas\nimport 9bad, _ok";
        assert_eq!(
            code_imports(code),
            names(&["pandas", "numpy", "sklearn", "json", "os", "_ok"])
        );
        assert!(code_imports("print(1)").is_empty());
        let many: String = (0..100).map(|i| format!("import m{i}\n")).collect();
        assert_eq!(code_imports(&many).len(), MAX_CODE_IMPORTS);
    }

    #[test]
    fn the_list_is_bounded() {
        let learned = Learned::default();
        let many: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
        learned.record(&many);
        assert_eq!(learned.modules().len(), MAX_MODULES);
    }
}
