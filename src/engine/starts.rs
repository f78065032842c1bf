//! A key's recent starts, as the lease record of a paced serializer over a store carries them:
//! what makes its pace hold across isolates.
//!
//! ```json
//! {"keyturn":1,"state":"free",…,"starts":"1764452000000,40,160"}
//! ```
//!
//! The first start in epoch milliseconds of its writer's clock, then each next one as the
//! milliseconds after the one before: whole milliseconds rounded up, so a start read back is
//! never earlier than it was and the window it bounds never shorter. A turn reads them when it
//! takes the key's lease (the read a take makes anyway), starts its work once they allow, adds
//! its own start, and every write of the lease carries them on: a start within a batch costs
//! no store call. A record that loses them — lost by its store, or a holder that died before
//! its next write — lets at most one window's worth of starts through again.
//!
//! An entry that does not parse ends the list there: starts only pace works, so a bad one costs
//! nobody a lease.

use super::decimal::push_decimal;
use super::options::MAX_RATE_LIMIT;

/// A key's last starts, oldest first, in whole epoch milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Starts(Vec<f64>);

impl Starts {
    /// The starts of a record's `starts` field.
    pub fn parse(text: &str) -> Starts {
        let mut starts = Vec::new();
        let mut last = 0.0;
        for entry in text.as_bytes().split(|byte| *byte == b',') {
            let digits = (1..=16).contains(&entry.len()) && entry.iter().all(u8::is_ascii_digit);
            if !digits || starts.len() == MAX_RATE_LIMIT as usize {
                break;
            }
            let n = entry
                .iter()
                .fold(0.0, |n, digit| n * 10.0 + f64::from(digit - b'0'));
            last = if starts.is_empty() { n } else { last + n };
            starts.push(last);
        }
        Starts(starts)
    }

    /// Writes the field (nothing when there are no starts).
    pub(crate) fn push_field(&self, out: &mut String) {
        let mut last = 0.0;
        for (i, &at) in self.0.iter().enumerate() {
            out.push_str(if i == 0 { ",\"starts\":\"" } else { "," });
            push_decimal(out, (at - last).max(0.0) as u64);
            last = at;
        }
        if !self.0.is_empty() {
            out.push('"');
        }
    }

    /// A work started at `wall` (epoch milliseconds): kept, with the `limit` starts before it at
    /// most.
    pub(crate) fn started(&mut self, wall: f64, limit: u32) {
        let newest = self.0.last().copied().unwrap_or(0.0);
        self.0.push(wall.ceil().max(newest));
        let extra = self.0.len().saturating_sub(paced_limit(limit));
        self.0.drain(..extra);
    }

    /// The newest start was made at `wall`, not before (its host called the work then).
    pub(crate) fn restamp(&mut self, wall: f64) {
        if let Some(newest) = self.0.last_mut() {
            *newest = newest.max(wall.ceil());
        }
    }

    /// When the next work may start by these starts, at most `limit` in any window of
    /// `period_ms` (epoch milliseconds; −∞ when it may at any time).
    pub(crate) fn next_start(&self, limit: u32, period_ms: f64) -> f64 {
        let limit = paced_limit(limit);
        match self.0.len().checked_sub(limit) {
            Some(oldest) => self
                .0
                .get(oldest)
                .map_or(f64::NEG_INFINITY, |at| at + period_ms),
            None => f64::NEG_INFINITY,
        }
    }

    /// Whether none are known.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The starts, oldest first.
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }
}

/// How many starts a window lets through: `limit`, but one more in the fault harness's planted
/// bug (faults/README.md), built only by faults/planted-fences.sh.
fn paced_limit(limit: u32) -> usize {
    limit as usize + usize::from(cfg!(keyturn_planted = "pace-limit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_as_deltas_rounded_up() {
        let mut starts = Starts::default();
        for at in [
            1_764_452_000_000.2,
            1_764_452_000_040.0,
            1_764_452_000_039.0,
        ] {
            starts.started(at, 3);
        }
        assert_eq!(
            starts.as_slice(),
            &[
                1_764_452_000_001.0,
                1_764_452_000_040.0,
                1_764_452_000_040.0
            ],
            "rounded up, never before the one before"
        );
        let mut out = String::new();
        starts.push_field(&mut out);
        assert_eq!(out, ",\"starts\":\"1764452000001,39,0\"");
        assert_eq!(Starts::parse("1764452000001,39,0"), starts);
    }

    #[test]
    fn keeps_the_last_limit_and_says_when_the_next_may_start() {
        let mut starts = Starts::default();
        assert_eq!(starts.next_start(2, 100.0), f64::NEG_INFINITY);
        starts.started(0.0, 2);
        assert_eq!(starts.next_start(2, 100.0), f64::NEG_INFINITY);
        starts.started(10.0, 2);
        assert_eq!(starts.next_start(2, 100.0), 100.0);
        starts.started(100.0, 2);
        assert_eq!(starts.as_slice(), &[10.0, 100.0]);
        assert_eq!(starts.next_start(2, 100.0), 110.0);
        assert_eq!(
            starts.next_start(1, 100.0),
            200.0,
            "a smaller limit reads the newest"
        );
    }

    #[test]
    fn a_bad_entry_ends_the_list() {
        assert_eq!(Starts::parse("5,x,7").as_slice(), &[5.0]);
        assert!(Starts::parse("").is_empty());
        assert!(Starts::parse("-1").is_empty());
        let long = vec!["1"; 2000].join(",");
        assert_eq!(
            Starts::parse(&long).as_slice().len(),
            MAX_RATE_LIMIT as usize
        );
    }
}
