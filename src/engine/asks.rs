//! The queue of isolates waiting for a name, as its record carries it: who asked, in the order
//! their asks reached the store, and until when each waits.
//!
//! ```json
//! {"keyturn":1,"state":"held",…,"asks":"9f0c1a2b3c4d5e6f:1764452004000,0a1b2c3d4e5f6071:1764452003500"}
//! ```
//!
//! An isolate whose acquisition finds the name held elsewhere adds its ask with one CAS that
//! keeps every other field as it was, so the holder's lease is untouched (its next write finds
//! the version moved, reads, and sees the record still its own). A holder with asks in its
//! record frees it at its next release instead of handing it on here, and the free record is
//! offered to the asks in order: each gets [`OFFER_MS`] from the release's `at`, the first one
//! any time. So an isolate that asked and then died delays the name by one [`OFFER_MS`], and
//! its ask lapses at the end of its wait (`until`, on the asker's wall clock) — an ask is one
//! write, never kept alive by more.
//!
//! Order is fairness, not safety: every take is still a CAS, so a clock that disagrees, a lost
//! ask or a full queue ([`MAX_ASKS`]) only changes who goes first.

/// The most asks a record carries; an isolate that finds the queue full waits as before asks
/// existed (polling, or watching the record).
pub const MAX_ASKS: usize = 16;

/// How long a free record stays offered to each ask in turn, from the release's `at`.
pub const OFFER_MS: f64 = 100.0;

/// Hex digits of an ask's id: the first of the asking acquisition's token.
pub const ASK_ID_LEN: usize = 16;

/// An isolate's id in asks: [`ASK_ID_LEN`] hex digits (a plain array, so asks need no
/// allocation each).
pub type AskId = [u8; ASK_ID_LEN];

/// One isolate's ask: its id, and when its wait ends (epoch milliseconds of its
/// wall clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ask {
    /// The isolate's id ([`ASK_ID_LEN`] hex digits).
    pub id: AskId,
    /// When the asker stops waiting.
    pub until: f64,
}

/// The asks a record carries, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asks(Vec<Ask>);

impl Asks {
    /// The asks of a record's `asks` field. An entry that does not parse is left out: asks only
    /// order waiters, so a bad one costs nobody a lease.
    pub fn parse(text: &str) -> Asks {
        let mut asks = Vec::new();
        for entry in text.as_bytes().split(|byte| *byte == b',') {
            if asks.len() == MAX_ASKS {
                break;
            }
            let (Some(id), Some(b':'), Some(until)) = (
                entry.get(..ASK_ID_LEN),
                entry.get(ASK_ID_LEN).copied(),
                entry.get(ASK_ID_LEN + 1..),
            ) else {
                continue;
            };
            let hex = id.iter().all(u8::is_ascii_hexdigit);
            let digits = (1..=16).contains(&until.len()) && until.iter().all(u8::is_ascii_digit);
            if let (true, true, Ok(id)) = (hex, digits, AskId::try_from(id)) {
                asks.push(Ask {
                    id,
                    until: until
                        .iter()
                        .fold(0.0, |n, digit| n * 10.0 + f64::from(digit - b'0')),
                });
            }
        }
        Asks(asks)
    }

    /// Appends the record's `asks` field (nothing when there are none).
    pub(crate) fn push_field(&self, out: &mut String) {
        for (i, ask) in self.0.iter().enumerate() {
            out.push_str(if i == 0 { ",\"asks\":\"" } else { "," });
            out.extend(ask.id.iter().map(|&byte| char::from(byte)));
            out.push(':');
            crate::engine::decimal::push_decimal(out, ask.until.max(0.0).floor() as u64);
        }
        if !self.0.is_empty() {
            out.push('"');
        }
    }

    /// Whether nobody asked.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many asked.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The asks still waiting at `wall`.
    pub fn live(&self, wall: f64) -> Asks {
        Asks(
            self.0
                .iter()
                .filter(|ask| ask.until > wall)
                .copied()
                .collect(),
        )
    }

    /// Where `id` is in the queue.
    pub fn position(&self, id: &AskId) -> Option<usize> {
        self.0.iter().position(|ask| ask.id == *id)
    }

    /// The queue with `id` asking last, waiting until `until`; `None` when it is full.
    pub fn with(&self, id: &AskId, until: f64) -> Option<Asks> {
        if self.0.len() >= MAX_ASKS {
            return None;
        }
        let mut asks = self.0.clone();
        asks.push(Ask {
            id: *id,
            until: until.floor(),
        });
        Some(Asks(asks))
    }

    /// Which ask a free record released at `at` is offered to at `wall`: the index of the ask
    /// whose [`OFFER_MS`] runs then (the length once every one ran).
    fn offered(&self, at: f64, wall: f64) -> usize {
        let turns = ((wall - at) / OFFER_MS).floor().max(0.0);
        (turns as usize).min(self.0.len())
    }

    /// Whether `id` may take a free record released at `at` with these asks, at `wall`: with
    /// no asks, anyone; else the first ask at any time, a later one once its offer came, and
    /// one not in the queue once every offer ran.
    pub fn may_take(&self, id: &AskId, at: f64, wall: f64) -> bool {
        let offered = self.offered(at, wall);
        match self.position(id) {
            None => offered >= self.0.len(),
            Some(i) => i == 0 || offered >= i,
        }
    }

    /// When (wall) `id` may take a free record released at `at`, if not yet.
    pub fn offer_at(&self, id: &AskId, at: f64) -> f64 {
        let i = self.position(id).unwrap_or(self.0.len());
        at + i as f64 * OFFER_MS
    }

    /// The queue once `id` took a free record released at `at` (`None`: a held record, taken
    /// over): without `id`, and without the asks whose offer ran out before it.
    pub fn taken(&self, id: &AskId, at: Option<f64>, wall: f64) -> Asks {
        let passed = at.map_or(0, |at| self.offered(at, wall));
        let mine = self.position(id);
        Asks(
            self.0
                .iter()
                .enumerate()
                .filter(|(i, ask)| {
                    ask.id != *id && (*i >= passed || mine.is_some_and(|mine| *i > mine))
                })
                .map(|(_, ask)| *ask)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &AskId = b"aaaaaaaaaaaaaaaa";
    const B: &AskId = b"bbbbbbbbbbbbbbbb";
    const C: &AskId = b"cccccccccccccccc";

    fn queue(ids: &[&AskId]) -> Asks {
        ids.iter().fold(Asks::default(), |asks, id| {
            asks.with(id, 10_000.0).expect("room")
        })
    }

    #[test]
    fn round_trips_and_drops_what_does_not_parse() {
        let asks = queue(&[A, B]);
        let mut out = String::new();
        asks.push_field(&mut out);
        assert_eq!(
            out,
            ",\"asks\":\"aaaaaaaaaaaaaaaa:10000,bbbbbbbbbbbbbbbb:10000\""
        );
        let text = out.trim_start_matches(",\"asks\":\"").trim_end_matches('"');
        assert_eq!(Asks::parse(text), asks);
        let bad = Asks::parse("xyz:1,aaaaaaaaaaaaaaaa:,bbbbbbbbbbbbbbbb:12,cc:3");
        assert_eq!(
            bad,
            Asks(vec![Ask {
                id: *B,
                until: 12.0
            }])
        );
        let mut none = String::new();
        Asks::default().push_field(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn offers_in_order_one_window_each() {
        let asks = queue(&[A, B]);
        // The first ask may take at any time; the second once the first's offer ran.
        assert!(asks.may_take(A, 1_000.0, 1_000.0));
        assert!(asks.may_take(A, 1_000.0, 9_000.0));
        assert!(!asks.may_take(B, 1_000.0, 1_099.0));
        assert!(asks.may_take(B, 1_000.0, 1_100.0));
        // Someone who did not ask waits for every offer to run.
        assert!(!asks.may_take(C, 1_000.0, 1_199.0));
        assert!(asks.may_take(C, 1_000.0, 1_200.0));
        assert_eq!(asks.offer_at(B, 1_000.0), 1_100.0);
        assert_eq!(asks.offer_at(C, 1_000.0), 1_200.0);
        // With nobody asking, anyone.
        assert!(Asks::default().may_take(C, 1_000.0, 1_000.0));
    }

    #[test]
    fn a_taker_drops_itself_and_the_asks_it_waited_out() {
        let asks = queue(&[A, B, C]);
        assert_eq!(asks.taken(A, Some(1_000.0), 1_000.0), queue(&[B, C]));
        // B took in its own window: A's ran out, A is dropped (it is dead or late).
        assert_eq!(asks.taken(B, Some(1_000.0), 1_150.0), queue(&[C]));
        // A takeover of a held record keeps everyone else.
        assert_eq!(asks.taken(C, None, 99_999.0), queue(&[A, B]));
        // The first ask taking late drops nobody behind it.
        assert_eq!(asks.taken(A, Some(1_000.0), 1_250.0), queue(&[B, C]));
    }

    #[test]
    fn lapsed_asks_leave_and_the_queue_is_bounded() {
        let asks = Asks::default()
            .with(A, 500.0)
            .unwrap()
            .with(B, 900.0)
            .unwrap();
        assert_eq!(asks.live(600.0), Asks::default().with(B, 900.0).unwrap());
        let full = (0..MAX_ASKS).fold(Asks::default(), |asks, i| {
            let id = format!("{i:016x}");
            asks.with(&AskId::try_from(id.as_bytes()).unwrap(), 1.0)
                .unwrap()
        });
        assert!(full.with(A, 1.0).is_none());
    }
}
