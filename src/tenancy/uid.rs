//! Each tenant's own sandbox uid, derived from its name.
//!
//! # Why it is built this way
//!
//! Tenants' sandboxes are kept apart by what they mount. A uid of their own adds a second wall:
//! a tenant's directories belong to its uid and are closed to every other (0700, 0750), so a
//! mount shared by mistake, a path an engine resolves differently or a bug in the mount list
//! still leaves one tenant's code facing `EACCES` on another's files. The kernel's per-uid
//! counts (`RLIMIT_NPROC`) then count one tenant's processes, not every tenant's.
//!
//! * **Derived, not stored.** The uid is a hash of the tenant's name (SHA-256, domain-separated)
//!   within the configured range. Every server computes the same uid for the same name with
//!   nothing to share: a swarm's nodes agree on who owns what on the shared volume, a re-created
//!   server container finds its tenants' files theirs, and adding or removing a tenant changes
//!   no other tenant's uid.
//! * **Collisions are refused, never resolved.** Two names can hash to one uid. Moving one of
//!   them elsewhere (the next free uid, say) would make a tenant's uid depend on which other
//!   tenants exist, and files on disk keep the uid they were written with. So [`assign`] refuses
//!   the tenant list at start, naming both tenants and the fixes. In the default range of 268
//!   million uids, 100 tenants share one with a chance of about 1 in 54,000; 1,000 tenants,
//!   about 1 in 540.
//! * **The default range**, [`DEFAULT_RANGE`] (1879048192-2147352575, `0x70000000-0x7FFDFFFF`),
//!   is the block the systemd project's table of uid ranges leaves unused by anything: above the
//!   host's users (below 60001), systemd's dynamic users (61184-65519), `nobody` (65534), the
//!   subordinate ranges `useradd` hands out for rootless containers and user-namespace remapping
//!   (from 100000, up to 600100000 by default) and systemd-nspawn's container ranges
//!   (524288-1879048191); below systemd's foreign-image range (from 2147352576) and below 2^31,
//!   past which Docker's `--user` refuses a uid and signed 32-bit code breaks. The gid equals
//!   the uid.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// The lowest uid a range may start at: below are the host's own users and system accounts
/// (and `nobody`, 65534).
pub const MIN_UID: u32 = 65536;
/// The highest uid a range may end at: Docker refuses a `--user` past 2^31 - 1.
pub const MAX_UID: u32 = i32::MAX as u32;

/// The default range (see the module's documentation for the choice).
pub const DEFAULT_RANGE: UidRange = UidRange {
    first: 0x7000_0000,
    last: 0x7FFD_FFFF,
};

/// What the hash of a name starts with, so the uid is not the digest anything else takes.
const DOMAIN: &[u8] = b"code-execution-mcp tenant sandbox uid\0";

/// The uids tenants' sandboxes may run as, `first` to `last` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    first: u32,
    last: u32,
}

impl UidRange {
    /// The range `first..=last`, within [`MIN_UID`]..=[`MAX_UID`].
    pub fn new(first: u32, last: u32) -> Result<Self, String> {
        if first > last {
            return Err(format!(
                "{first}-{last} is empty: the first uid must not be above the last"
            ));
        }
        if first < MIN_UID || last > MAX_UID {
            return Err(format!(
                "{first}-{last} must lie within {MIN_UID}-{MAX_UID}: uids below {MIN_UID} are the host's own users, and Docker refuses uids above {MAX_UID}"
            ));
        }
        Ok(Self { first, last })
    }

    pub fn first(&self) -> u32 {
        self.first
    }

    pub fn last(&self) -> u32 {
        self.last
    }

    /// How many uids the range holds.
    pub fn len(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }

    /// Never empty (a range holds at least one uid); here for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Tenant `name`'s uid: the first 8 bytes of SHA-256(domain, name) modulo the range's
    /// length, from its first uid. The same on every server, for every version of it.
    pub fn uid_of(&self, name: &str) -> u32 {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(name.as_bytes())
            .finalize();
        let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        let offset = u32::try_from(head % self.len()).expect("below the range's length");
        self.first + offset
    }
}

impl Default for UidRange {
    fn default() -> Self {
        DEFAULT_RANGE
    }
}

impl fmt::Display for UidRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl FromStr for UidRange {
    type Err = String;

    /// `FIRST-LAST`, both decimal uids.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |part: &str| part.trim().parse::<u32>().ok();
        match s.split_once('-').map(|(a, b)| (parse(a), parse(b))) {
            Some((Some(first), Some(last))) => Self::new(first, last),
            _ => Err(format!(
                "{s:?} is not a uid range: write FIRST-LAST, e.g. {DEFAULT_RANGE}"
            )),
        }
    }
}

/// Two tenants whose names give the same uid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenants `{first}` and `{second}` would both run their sandboxes as uid {uid} (derived from their names within --tenant-uid-range {range}), and tenants must never share a uid. Rename one of them in the tokens file (moving its directory DATA_DIR/tenants/NAME with it), or choose another --tenant-uid-range (CEM_TENANT_UID_RANGE): at its next start every tenant's directories are handed to its new uid"
)]
pub struct UidCollision {
    pub first: String,
    pub second: String,
    pub uid: u32,
    pub range: UidRange,
}

/// Every tenant's uid, or the first two tenants (in name order) that would share one.
pub fn assign<'a>(
    names: impl IntoIterator<Item = &'a str>,
    range: UidRange,
) -> Result<BTreeMap<String, u32>, UidCollision> {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    let mut by_uid: BTreeMap<u32, &str> = BTreeMap::new();
    let mut uids = BTreeMap::new();
    for name in names {
        let uid = range.uid_of(name);
        if let Some(first) = by_uid.insert(uid, name) {
            return Err(UidCollision {
                first: first.to_string(),
                second: name.to_string(),
                uid,
                range,
            });
        }
        uids.insert(name.to_string(), uid);
    }
    Ok(uids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_uid_is_stable_and_within_the_range() {
        // Pinned: a change here would hand every tenant's files to a new uid.
        assert_eq!(DEFAULT_RANGE.uid_of("alice"), DEFAULT_RANGE.uid_of("alice"));
        let pinned = [("alice", ALICE_UID), ("bob", BOB_UID)];
        for (name, uid) in pinned {
            assert_eq!(DEFAULT_RANGE.uid_of(name), uid, "{name}");
        }
        let small = UidRange::new(70_000, 70_009).unwrap();
        for i in 0..1000 {
            let name = format!("tenant-{i}");
            let uid = small.uid_of(&name);
            assert!((70_000..=70_009).contains(&uid), "{name}: {uid}");
            let uid = DEFAULT_RANGE.uid_of(&name);
            assert!(
                (DEFAULT_RANGE.first()..=DEFAULT_RANGE.last()).contains(&uid),
                "{name}: {uid}"
            );
        }
    }

    /// Alice's and Bob's uids in the default range (tests/tenants.rs checks them in sandboxes).
    const ALICE_UID: u32 = 1_963_376_684;
    const BOB_UID: u32 = 2_124_858_106;

    #[test]
    fn many_tenants_get_distinct_uids() {
        let names: Vec<String> = (0..2000).map(|i| format!("tenant-{i}")).collect();
        let uids = assign(names.iter().map(String::as_str), DEFAULT_RANGE).unwrap();
        assert_eq!(uids.len(), 2000);
        let distinct: std::collections::BTreeSet<u32> = uids.values().copied().collect();
        assert_eq!(distinct.len(), 2000);
        // Adding tenants changes no one's uid.
        let fewer = assign(names[..10].iter().map(String::as_str), DEFAULT_RANGE).unwrap();
        for (name, uid) in fewer {
            assert_eq!(uids[&name], uid);
        }
    }

    #[test]
    fn a_collision_names_both_tenants_and_the_fixes() {
        let one = UidRange::new(70_000, 70_000).unwrap();
        let err = assign(["bob", "alice", "alice"], one).unwrap_err();
        assert_eq!(
            (err.first.as_str(), err.second.as_str(), err.uid),
            ("alice", "bob", 70_000)
        );
        let text = err.to_string();
        for needle in [
            "`alice` and `bob`",
            "uid 70000",
            "--tenant-uid-range 70000-70000",
            "Rename one of them",
            "CEM_TENANT_UID_RANGE",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        // One tenant alone never collides, whatever the range.
        assert_eq!(assign(["alice"], one).unwrap()["alice"], 70_000);
    }

    #[test]
    fn ranges_parse_and_stay_within_what_engines_take() {
        assert_eq!(
            "1879048192-2147352575".parse::<UidRange>().unwrap(),
            DEFAULT_RANGE
        );
        assert_eq!(DEFAULT_RANGE.len(), 268_304_384);
        assert_eq!(
            " 100000 - 165535 ".parse::<UidRange>().unwrap().len(),
            65_536
        );
        for bad in ["", "100000", "a-b", "100000-", "-5-10", "200000-100000"] {
            assert!(bad.parse::<UidRange>().is_err(), "{bad}");
        }
        let low = "10001-70000".parse::<UidRange>().unwrap_err();
        assert!(low.contains("host's own users"), "{low}");
        for high in ["70000-2147483648", "70000-4294967295"] {
            let err = high.parse::<UidRange>().unwrap_err();
            assert!(err.contains("Docker refuses"), "{err}");
        }
    }
}
