//! Randomness, injected: the platform's crypto on wasm (`PlatformRandom`, in the binding), a
//! seeded generator in tests.

use std::cell::Cell;

/// A source of random bytes.
pub trait Random {
    /// Fills `bytes` with random bytes.
    fn fill(&self, bytes: &mut [u8]);

    /// A lock token: 128 random bits as 32 hex digits (at least the 122 of a UUID v4).
    fn token(&self) -> String {
        let mut bytes = [0u8; 16];
        self.fill(&mut bytes);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        // One allocation of the final size (a collect would grow it).
        let mut token = String::with_capacity(32);
        for b in bytes {
            token.push(char::from(HEX[usize::from(b >> 4)]));
            token.push(char::from(HEX[usize::from(b & 15)]));
        }
        token
    }

    /// A number uniformly in `[0, 1)`, for jitter.
    fn unit(&self) -> f64 {
        let mut bytes = [0u8; 4];
        self.fill(&mut bytes);
        f64::from(u32::from_le_bytes(bytes)) / 4_294_967_296.0
    }
}

impl<R: Random + ?Sized> Random for std::rc::Rc<R> {
    fn fill(&self, bytes: &mut [u8]) {
        (**self).fill(bytes)
    }
}

/// Random bytes drawn from the source in blocks and served once each, in order (for
/// `PlatformRandom`, on wasm32; tested natively).
///
/// Why: a crossing into `crypto.getRandomValues` costs a few microseconds in Node (more than
/// the rest of an uncontended acquisition's own work), and an acquisition needs only 16 bytes.
/// The bytes are the platform's CSPRNG output all the same; none is ever served twice.
#[cfg(any(target_arch = "wasm32", test))]
#[derive(Debug)]
pub struct Pool {
    block: [u8; POOL_BYTES],
    /// Bytes of `block` already served; `POOL_BYTES` when empty.
    used: usize,
}

/// Bytes drawn from the source at a time.
#[cfg(any(target_arch = "wasm32", test))]
pub const POOL_BYTES: usize = 4096;

#[cfg(any(target_arch = "wasm32", test))]
impl Pool {
    /// An empty pool: the first take draws a block.
    pub fn new() -> Self {
        Pool {
            block: [0; POOL_BYTES],
            used: POOL_BYTES,
        }
    }

    /// Fills `bytes` with unserved bytes, drawing blocks from `source` as needed. A request
    /// bigger than a block goes to `source` directly.
    pub fn take(&mut self, bytes: &mut [u8], source: impl Fn(&mut [u8])) {
        if bytes.len() > POOL_BYTES {
            source(bytes);
            return;
        }
        // Byte by byte (a token is 16), with no index that could panic.
        for byte in bytes {
            if self.used >= POOL_BYTES {
                source(&mut self.block);
                self.used = 0;
            }
            if let Some(served) = self.block.get_mut(self.used) {
                *byte = *served;
                // Served bytes are wiped, so the pool holds only what nobody has seen.
                *served = 0;
            }
            self.used += 1;
        }
    }
}

#[cfg(any(target_arch = "wasm32", test))]
impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

/// A deterministic generator (xorshift64*) for tests. Not for tokens in production.
#[derive(Debug, Clone)]
pub struct SeededRandom(Cell<u64>);

impl SeededRandom {
    /// A generator from `seed` (0 is replaced by a fixed non-zero seed).
    pub fn new(seed: u64) -> Self {
        SeededRandom(Cell::new(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        }))
    }

    fn next(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

impl Random for SeededRandom {
    fn fill(&self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests;
