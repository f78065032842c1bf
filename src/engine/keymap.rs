//! The crate's one map: string keys to `u32` slots, by open addressing with linear probing and
//! backward-shift deletion (no tombstones, so a map that churns keys never fills with them).
//!
//! Why not `std`'s `HashMap`: its table code (SIMD-style groups, generic rehashing) is ~5 KB of
//! each wasm module, and every key index here maps short strings to slot numbers — a job this
//! file does in a fraction of that. Keys hash with [`KeyHasher`] (Fx, a word at a time). Like
//! any unkeyed hash it does not resist keys chosen to collide; wasm32-unknown-unknown has no
//! randomness at startup to key one with.

use std::hash::Hasher;
use std::rc::Rc;

/// The map's hash: Fx (rustc's), a word at a time. Keys are short, and std's SipHash costs
/// ~1.5 KB of wasm and most of a lookup; it would buy no HashDoS resistance here anyway, since
/// wasm32-unknown-unknown has no randomness to key it with.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(<[u8; 8]>::try_from(chunk).map_or(0, u64::from_le_bytes));
        }
        // The last bytes as one word too (zero-padded): one step, and no loop to unroll.
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            for (to, &byte) in word.iter_mut().zip(rest) {
                *to = byte;
            }
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Smallest table, in slots (a power of two).
const MIN_SLOTS: usize = 8;

/// Keys to slots.
#[derive(Default)]
pub(crate) struct KeyMap {
    /// A power of two long (or empty); `None` is a free slot.
    slots: Vec<Option<(Rc<str>, u32)>>,
    len: usize,
}

impl core::fmt::Debug for KeyMap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyMap").field("len", &self.len).finish()
    }
}

fn hash(key: &str) -> usize {
    let mut hasher = KeyHasher::default();
    hasher.write(key.as_bytes());
    // The multiply leaves the low bits weakest: fold the high half in.
    let hash = hasher.finish();
    (hash ^ (hash >> 32)) as usize
}

impl KeyMap {
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// Where `key` is, or the free slot where it would go. The table is never full (see
    /// `insert`), so the probe ends; every index is within it (`mask`), and is read with `get`
    /// all the same, so that no path panics.
    fn find(&self, key: &str) -> Result<usize, usize> {
        let mask = self.mask();
        let mut at = hash(key) & mask;
        loop {
            match self.slots.get(at) {
                Some(None) | None => return Err(at),
                Some(Some((stored, _))) if **stored == *key => return Ok(at),
                Some(Some(_)) => at = (at + 1) & mask,
            }
        }
    }

    /// The slot of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&u32> {
        if self.len == 0 {
            return None;
        }
        let at = self.find(key).ok()?;
        self.slots.get(at)?.as_ref().map(|(_, value)| value)
    }

    /// Sets `key`'s slot; the one it had, if any.
    pub(crate) fn insert(&mut self, key: Rc<str>, value: u32) -> Option<u32> {
        // At most three quarters full, so probes stay short.
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        match self.find(&key) {
            Ok(at) => self
                .slots
                .get_mut(at)?
                .as_mut()
                .map(|(_, old)| core::mem::replace(old, value)),
            Err(at) => {
                if let Some(slot) = self.slots.get_mut(at) {
                    *slot = Some((key, value));
                    self.len += 1;
                }
                None
            }
        }
    }

    /// Removes `key`; the slot it had.
    pub(crate) fn remove(&mut self, key: &str) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let mut hole = self.find(key).ok()?;
        let (_, value) = self.slots.get_mut(hole)?.take()?;
        self.len -= 1;
        // Backward shift: each later entry of the run whose home is not between the hole and
        // itself moves into the hole, so every key stays reachable from its home without a gap.
        let mask = self.mask();
        let mut at = (hole + 1) & mask;
        while let Some(Some((key, _))) = self.slots.get(at) {
            let home = hash(key) & mask;
            let stays = if hole <= at {
                hole < home && home <= at
            } else {
                hole < home || home <= at
            };
            if !stays {
                let moved = self.slots.get_mut(at).and_then(Option::take);
                if let Some(slot) = self.slots.get_mut(hole) {
                    *slot = moved;
                }
                hole = at;
            }
            at = (at + 1) & mask;
        }
        if self.len == 0 && self.slots.len() > MIN_SLOTS * 8 {
            *self = KeyMap::default();
        }
        Some(value)
    }

    fn grow(&mut self) {
        let slots = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = core::mem::take(&mut self.slots);
        self.slots.resize_with(slots, || None);
        for (key, value) in old.into_iter().flatten() {
            if let Err(at) = self.find(&key) {
                if let Some(slot) = self.slots.get_mut(at) {
                    *slot = Some((key, value));
                }
            }
        }
    }

    /// Whether no key is in the map.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keys in the map.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots held.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::KeyMap;
    use std::collections::HashMap;
    use std::rc::Rc;

    #[test]
    fn agrees_with_std_under_random_inserts_and_removes() {
        let mut ours = KeyMap::default();
        let mut std: HashMap<String, u32> = HashMap::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for step in 0..200_000u32 {
            // Few enough keys that they collide and churn; sometimes a burst of new ones.
            let key = format!(
                "k{}",
                next() % if step % 5000 < 100 { 100_000 } else { 600 }
            );
            match next() % 3 {
                0 => assert_eq!(ours.remove(&key), std.remove(&key), "{key}"),
                _ => assert_eq!(
                    ours.insert(Rc::from(key.as_str()), step),
                    std.insert(key, step)
                ),
            }
            assert_eq!(ours.len(), std.len());
        }
        for (key, value) in &std {
            assert_eq!(ours.get(key), Some(value));
        }
        for key in std.keys().cloned().collect::<Vec<_>>() {
            assert!(ours.remove(&key).is_some());
        }
        assert!(ours.is_empty());
        assert_eq!(ours.get("k1"), None);
        assert!(ours.capacity() <= 64, "an emptied map gives its table back");
    }
}
