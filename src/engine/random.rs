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

/// A source of randomness that no call uses: a serializer without a store draws nothing (the
/// Rust front end's and the serializer's wasm module's).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRandom;

impl Random for NoRandom {
    fn fill(&self, bytes: &mut [u8]) {
        bytes.fill(0);
    }
}

/// A deterministic generator (xorshift64*): for tests, and — seeded from the platform's crypto
/// — the sequence `PlatformRandom` serves.
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
