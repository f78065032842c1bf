//! The slots of one busy key: which of its `concurrency` slots its started works hold, so each
//! running work gets the lowest free one (`turn.slot` in JavaScript, [`WorkSignal::slot`] in
//! Rust).
//!
//! [`WorkSignal::slot`]: super::WorkSignal::slot

/// Most works of one key that may run at once: `concurrency` is a whole number from 1 to this.
pub const MAX_CONCURRENCY: usize = 1024;

/// Taken slots as bits: the first 64 inline (a key at `concurrency` ≤ 64 allocates nothing),
/// the rest in words made when first needed.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    low: u64,
    high: Vec<u64>,
}

impl Slots {
    /// Takes the lowest free slot. The caller starts a work only while fewer than
    /// `concurrency` run, so one is free below it.
    pub(crate) fn take(&mut self) -> u16 {
        if self.low != u64::MAX {
            let bit = (!self.low).trailing_zeros();
            self.low |= 1 << bit;
            return bit as u16;
        }
        // No indexing: a bounds check's panic would keep integer formatting in the wasm.
        for (at, word) in self.high.iter_mut().enumerate() {
            if *word != u64::MAX {
                let bit = (!*word).trailing_zeros();
                *word |= 1 << bit;
                return (64 + at * 64 + bit as usize) as u16;
            }
        }
        self.high.push(1);
        (self.high.len() * 64) as u16
    }

    /// Frees a slot taken before.
    pub(crate) fn free(&mut self, slot: u16) {
        let slot = usize::from(slot);
        if slot < 64 {
            self.low &= !(1 << slot);
        } else if let Some(word) = self.high.get_mut((slot - 64) / 64) {
            *word &= !(1 << (slot % 64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_free_slot_is_taken_across_words() {
        let mut slots = Slots::default();
        let taken: Vec<u16> = (0..MAX_CONCURRENCY).map(|_| slots.take()).collect();
        assert_eq!(taken, (0..MAX_CONCURRENCY as u16).collect::<Vec<_>>());
        for slot in [3, 64, 700, 1023] {
            slots.free(slot);
        }
        assert_eq!(
            [slots.take(), slots.take(), slots.take(), slots.take()],
            [3, 64, 700, 1023]
        );
    }
}
