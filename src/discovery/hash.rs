//! A fast, non-cryptographic hasher for the index's maps (the Fx hash of rustc and Firefox).
//!
//! Building the index looks up every token of the catalog in a map, and the standard SipHash,
//! built to resist flooding by chosen keys, was a fifth of the load time. Flooding is not a
//! risk here: map keys come from the registry files, and a query adds at most 64 bounded terms.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i.into());
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i.into());
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn works_as_a_map_hasher() {
        let mut m: FastMap<String, u32> = FastMap::default();
        for (i, w) in ["a", "ab", "abcdefgh", "abcdefghi", ""].iter().enumerate() {
            m.insert((*w).to_owned(), i as u32);
        }
        assert_eq!(m["abcdefghi"], 3);
        assert_eq!(m[""], 4);
        assert_eq!(m.len(), 5);
    }
}
