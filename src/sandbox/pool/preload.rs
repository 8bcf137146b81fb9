//! What pooled containers import before their job: a fixed list (`--preload pandas,numpy`),
//! nothing (`--preload none`), or, by default, what this tenant's recent code imported.
//!
//! Why learned: importing numpy and pandas costs about a second of CPU per container. Paid by
//! every pooled container whether its code needs them or not, it made the default slower under
//! load than a plain `docker run`; never paid, every data call waits for the import. The
//! harness reports the modules each job's own code imported ([`Learned::record`]), and a module
//! is preloaded once at least half of the recent executions imported it: code that imports
//! nothing soon gets containers that import nothing, and a notebook of pandas calls gets pandas
//! ready. (Under pressure the pool skips preloading altogether: see `Pool::under_pressure`.)

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

    /// The modules at least half of the recent executions imported, most used first (by first
    /// use on a tie), at most [`MAX_MODULES`].
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
        let needed = recent.len().div_ceil(2).max(1);
        counts.retain(|(_, n)| *n >= needed);
        // Stable: equal counts keep the order of first use.
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts
            .into_iter()
            .take(MAX_MODULES)
            .map(|(m, _)| m)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn what_half_the_recent_code_imported_is_preloaded() {
        let learned = Learned::default();
        assert!(
            learned.modules().is_empty(),
            "nothing learned: nothing preloaded"
        );
        learned.record(&names(&["pandas", "numpy"]));
        assert_eq!(learned.modules(), names(&["pandas", "numpy"]));
        learned.record(&[]);
        learned.record(&names(&["pandas"]));
        assert_eq!(
            learned.modules(),
            names(&["pandas"]),
            "2 of 3 is enough, 1 of 3 is not"
        );
        learned.record(&[]);
        assert_eq!(learned.modules(), names(&["pandas"]), "2 of 4");
        learned.record(&[]);
        assert!(learned.modules().is_empty(), "2 of 5");
    }

    #[test]
    fn code_that_imports_nothing_soon_gets_nothing_preloaded() {
        let learned = Learned::default();
        for _ in 0..WINDOW {
            learned.record(&names(&["pandas"]));
        }
        for _ in 0..WINDOW / 2 + 1 {
            learned.record(&[]);
        }
        assert!(learned.modules().is_empty());
    }

    #[test]
    fn the_list_is_bounded() {
        let learned = Learned::default();
        let many: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
        learned.record(&many);
        assert_eq!(learned.modules().len(), MAX_MODULES);
    }
}
