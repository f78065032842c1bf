//! The one conversion module between the step machines' typed values and what crosses the wasm
//! boundary: numbers, strings and the JS values the machines hold. Every code is
//! [`wire`](crate::wire)'s; every rule is the `keyturn` crate's — nothing here decides.

use keyturn::machine::{Acquired, Answer, EnqueueError, GaveUp, Record, Released, Step};
use keyturn::{
    KeyError, LockError, LockOptions, LockStats, OptionError, SerializerOptionError, Stats,
};

use crate::wire::{lock, serializer, turns};

/// What a step carries besides its code, for the driver to read right after the call that
/// answered it (the machine runs no JavaScript in between, so nothing overwrites it first).
/// Each field has one meaning; a step leaves the fields it does not carry as they were.
#[derive(Debug, Default)]
pub struct StepView<V> {
    /// The record a create or replace writes.
    pub record: String,
    /// The version a replace must find.
    pub version: V,
    /// How long a store call may take, in milliseconds.
    pub bound_ms: f64,
    /// When a sleep or a wait ends at the latest, on the monotonic clock.
    pub wake_at: f64,
    /// The `concurrency` a record (or the name's acquisitions here) says, on a mismatch.
    pub found: f64,
}

impl<V> StepView<V> {
    /// Keeps `step`'s details, and answers its code.
    pub fn take(&mut self, step: Step<V>) -> f64 {
        match step {
            Step::Create { value, bound_ms } => {
                self.record = value;
                self.bound_ms = bound_ms;
                lock::CREATE
            }
            Step::Read { bound_ms } => {
                self.bound_ms = bound_ms;
                lock::READ
            }
            Step::Replace {
                version,
                value,
                bound_ms,
            } => {
                self.record = value;
                self.version = version;
                self.bound_ms = bound_ms;
                lock::REPLACE
            }
            Step::Sleep { until } => {
                self.wake_at = until;
                lock::SLEEP
            }
            Step::Wait { until } => {
                self.wake_at = until;
                lock::WAIT
            }
            Step::Watch { version, until } => {
                self.version = version;
                self.wake_at = until;
                lock::WATCH
            }
            Step::Held => lock::HELD,
            Step::Done => lock::DONE,
            Step::Lost => lock::LOST,
            Step::GiveUp => lock::GIVE_UP,
            Step::Failed => lock::ERROR,
            Step::Mismatch { found } => {
                self.found = f64::from(found);
                lock::MISMATCH
            }
        }
    }
}

/// The answer to a create or a replace (`kind` `CREATED` or `REPLACED`, with the new version or
/// none), a wake-up (`WOKE`), a watch the store ended (`CHANGED`), a failed call (`FAILED`) or
/// one past its bound (`TIMED_OUT`).
pub fn answer<V>(kind: f64, version: Option<V>) -> Answer<V> {
    if kind == lock::CREATED {
        Answer::Created(version)
    } else if kind == lock::REPLACED {
        Answer::Replaced(version)
    } else if kind == lock::WOKE {
        Answer::Woke
    } else if kind == lock::CHANGED {
        Answer::Changed
    } else if kind == lock::TIMED_OUT {
        Answer::TimedOut
    } else {
        // `FAILED`, or a kind the JS never sends: a failed call.
        Answer::Failed
    }
}

/// The count in one of this isolate's tokens: its last 16 hex digits, as a number (exact below
/// 2^53 tokens); NaN for a token not of that form.
pub fn token_count(token: &str) -> f64 {
    let digits = token.as_bytes().get(keyturn::machine::ASK_ID_LEN..);
    digits.map_or(f64::NAN, |digits| {
        digits.iter().fold(0.0, |count, digit| {
            let value = match digit {
                b'0'..=b'9' => digit - b'0',
                b'a'..=b'f' => digit - b'a' + 10,
                _ => return f64::NAN,
            };
            count * 16.0 + f64::from(value)
        })
    })
}

/// A record's fields as the host's JSON parser found them: each of ours, where it was there.
/// Its rules — the format, the fence's range, a held record's lease — are the crate's
/// ([`Record::from_fields`]).
#[derive(Debug, Default)]
pub struct RecordFields {
    /// `keyturn`: the format.
    pub format: Option<f64>,
    /// `state`: `"held"` or `"free"`.
    pub state: Option<String>,
    /// `token`.
    pub token: Option<String>,
    /// `fence`.
    pub fence: Option<f64>,
    /// `at`.
    pub at: Option<f64>,
    /// `lease`.
    pub lease: Option<f64>,
    /// `asks`.
    pub asks: Option<String>,
    /// `n`.
    pub n: Option<f64>,
}

/// The answer to a read: the version and the fields of the record found, or none.
pub fn read_answer<V>(found: Option<(V, RecordFields)>) -> Answer<V> {
    Answer::Read(found.map(|(version, fields)| {
        let record = Record::from_fields(
            fields.format,
            fields.state.as_deref(),
            fields.token,
            fields.fence,
            fields.at,
            fields.lease,
            fields.asks.as_deref(),
            fields.n,
        );
        (version, record)
    }))
}

/// A lock's options as JavaScript gives them: `undefined` for each it left out.
pub fn lock_options(
    wait_ms: Option<f64>,
    stale_ms: Option<f64>,
    max_clock_skew_ms: Option<f64>,
    store_timeout_ms: Option<f64>,
) -> LockOptions {
    LockOptions::given(wait_ms, stale_ms, max_clock_skew_ms, store_timeout_ms)
}

/// A lock's options as JavaScript gives them, with its `concurrency` (`undefined`: 1).
pub fn slot_options(
    wait_ms: Option<f64>,
    stale_ms: Option<f64>,
    max_clock_skew_ms: Option<f64>,
    store_timeout_ms: Option<f64>,
    concurrency: Option<f64>,
) -> LockOptions {
    let options = lock_options(wait_ms, stale_ms, max_clock_skew_ms, store_timeout_ms);
    match concurrency {
        Some(concurrency) => options.with_concurrency(concurrency),
        None => options,
    }
}

/// The refusal code of a lock option out of range.
pub fn option_refusal(error: OptionError) -> f64 {
    match error {
        OptionError::WaitMs(_) => lock::BAD_WAIT,
        OptionError::StaleMs(_) => lock::BAD_STALE,
        OptionError::MaxClockSkewMs(_) => lock::BAD_SKEW,
        OptionError::StoreTimeoutMs(_) => lock::BAD_STORE_TIMEOUT,
        OptionError::Concurrency(_) => lock::BAD_CONCURRENCY,
    }
}

/// The refusal code of an acquisition refused before it started.
pub fn acquire_refusal(error: LockError) -> f64 {
    match error {
        LockError::InvalidName(KeyError::Empty) => lock::NAME_EMPTY,
        LockError::InvalidName(KeyError::TooLong(_)) => lock::NAME_TOO_LONG,
        LockError::InvalidOption(error) => option_refusal(error),
        LockError::ConcurrencyMismatch { .. } => lock::CONCURRENCY_MISMATCH,
        // Nothing else refuses an acquisition before it starts.
        _ => lock::BAD_STALE,
    }
}

/// The refusal code of a serializer's options.
pub fn serializer_refusal(error: SerializerOptionError) -> f64 {
    match error {
        SerializerOptionError::TimeoutMs(_) => serializer::BAD_TIMEOUT,
        SerializerOptionError::MaxPending(_) => serializer::BAD_MAX_PENDING,
        SerializerOptionError::Concurrency(_) => serializer::BAD_CONCURRENCY,
    }
}

/// The refusal code of a call.
pub fn enqueue_refusal(error: EnqueueError) -> f64 {
    match error {
        EnqueueError::QueueFull { .. } => serializer::QUEUE_FULL,
        EnqueueError::InvalidTimeout(_) => serializer::BAD_TIMEOUT,
        EnqueueError::InvalidKey(KeyError::Empty) => serializer::KEY_EMPTY,
        EnqueueError::InvalidKey(KeyError::TooLong(_)) => serializer::KEY_TOO_LONG,
        EnqueueError::TooManyWorks => serializer::TOO_MANY,
        EnqueueError::IdleLine => serializer::IDLE_LINE,
    }
}

/// A line's change, as bits: `IDLE` when the key went idle, `NEXT` when a next work waits to
/// be started.
pub fn line_change(released: &Released) -> u32 {
    let idle = if released.idle { serializer::IDLE } else { 0.0 };
    let next = if released.next.is_some() {
        serializer::NEXT
    } else {
        0.0
    };
    idle as u32 | next as u32
}

/// What came of a caller giving up: `LEFT` with the line's change, `ABANDONED`, or 0.
pub fn gave_up(gave_up: GaveUp) -> u32 {
    match gave_up {
        GaveUp::Left(released) => serializer::LEFT as u32 | line_change(&released),
        GaveUp::Abandoned => serializer::ABANDONED as u32,
        GaveUp::Nothing => 0,
    }
}

/// What a turn does once its acquisition ended.
pub fn acquired<L>(acquired: &Acquired<L>) -> f64 {
    match acquired {
        Acquired::Run(_) => turns::RUN,
        Acquired::Release(_) => turns::RELEASE,
        Acquired::TimeOut => turns::TIME_OUT,
        Acquired::Nothing => turns::NONE,
    }
}

/// A serializer's counters, in the order of `wire::serializer::STATS`.
pub fn serializer_stats(stats: &Stats) -> Vec<f64> {
    vec![
        stats.keys as f64,
        stats.running as f64,
        stats.waiting as f64,
        stats.started as f64,
        stats.timed_out as f64,
        stats.aborted as f64,
        stats.refused as f64,
        stats.late_settled as f64,
        stats.coalesced as f64,
    ]
}

/// The store's lock counter of `wire::lock::STATS[index]` (0 past them).
pub fn lock_stat(stats: &LockStats, index: u32) -> f64 {
    let value = match index {
        0 => stats.held,
        1 => stats.waiting,
        2 => stats.acquisitions,
        3 => stats.hand_offs,
        4 => stats.takeovers,
        5 => stats.store_calls,
        6 => stats.store_failures,
        7 => stats.store_timeouts,
        8 => stats.read_backs_applied,
        9 => stats.watches,
        10 => stats.wake_ups,
        11 => stats.polls_saved,
        _ => 0,
    };
    value as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyturn::machine::{Released, SerializerCore};
    use keyturn::{
        Coalesce, KeyError, LockError, LockStats, OptionError, SerializerOptions, Stats,
    };

    use crate::wire;

    #[test]
    fn a_token_count_is_its_last_16_hex_digits() {
        assert_eq!(token_count("0123456789abcdef000000000000002a"), 42.0);
        assert_eq!(token_count("0123456789abcdef00000000000fffff"), 1_048_575.0);
        assert!(token_count("0123456789abcdef0000000000000x2a").is_nan());
        assert!(token_count("short").is_nan());
    }

    #[test]
    fn a_step_answers_its_code_and_leaves_what_it_carries_in_its_view() {
        let mut view = StepView::<&str>::default();
        let create = Step::Create {
            value: "record".into(),
            bound_ms: 7.0,
        };
        assert_eq!(view.take(create), lock::CREATE);
        assert_eq!((view.record.as_str(), view.bound_ms), ("record", 7.0));
        let replace = Step::Replace {
            version: "v2",
            value: "next".into(),
            bound_ms: 3.5,
        };
        assert_eq!(view.take(replace), lock::REPLACE);
        assert_eq!(
            (view.version, view.record.as_str(), view.bound_ms),
            ("v2", "next", 3.5)
        );
        assert_eq!(view.take(Step::Read { bound_ms: 1.0 }), lock::READ);
        assert_eq!(view.bound_ms, 1.0);
        assert_eq!(
            view.record, "next",
            "a read writes nothing: the view keeps the last record"
        );
        assert_eq!(view.take(Step::Sleep { until: 40.0 }), lock::SLEEP);
        assert_eq!(view.wake_at, 40.0);
        assert_eq!(view.take(Step::Wait { until: 41.0 }), lock::WAIT);
        assert_eq!(view.wake_at, 41.0);
        for (step, code) in [
            (Step::Held, lock::HELD),
            (Step::Done, lock::DONE),
            (Step::Lost, lock::LOST),
            (Step::GiveUp, lock::GIVE_UP),
            (Step::Failed, lock::ERROR),
        ] {
            assert_eq!(view.take(step), code);
        }
    }

    #[test]
    fn answers_from_the_js_are_the_cores() {
        assert!(matches!(
            answer(lock::CREATED, Some(1)),
            Answer::Created(Some(1))
        ));
        assert!(matches!(
            answer::<u8>(lock::CREATED, None),
            Answer::Created(None)
        ));
        assert!(matches!(
            answer(lock::REPLACED, Some(2)),
            Answer::Replaced(Some(2))
        ));
        assert!(matches!(answer::<u8>(lock::WOKE, None), Answer::Woke));
        assert!(matches!(answer::<u8>(lock::CHANGED, None), Answer::Changed));
        assert!(matches!(
            answer::<u8>(lock::TIMED_OUT, None),
            Answer::TimedOut
        ));
        assert!(matches!(answer::<u8>(lock::FAILED, None), Answer::Failed));
        assert!(
            matches!(answer::<u8>(99.0, None), Answer::Failed),
            "a kind the JS never sends"
        );

        let fields = RecordFields {
            format: Some(1.0),
            state: Some("held".into()),
            token: Some("t".into()),
            fence: Some(4.0),
            at: Some(10.0),
            lease: Some(2000.0),
            asks: Some("0123456789abcdef:99".into()),
            n: Some(3.0),
        };
        let Answer::Read(Some((version, Ok(record)))) = read_answer(Some(("v", fields))) else {
            panic!("a record of ours")
        };
        assert_eq!(
            (version, record.fence, record.lease, record.n),
            ("v", 4, Some(2000), 3)
        );
        assert_eq!(record.asks.position(b"0123456789abcdef"), Some(0));
        let mistyped = RecordFields {
            fence: Some(f64::NAN),
            ..RecordFields::default()
        };
        assert!(matches!(
            read_answer(Some(("v", mistyped))),
            Answer::Read(Some((_, Err(_))))
        ));
        assert!(matches!(read_answer::<&str>(None), Answer::Read(None)));
    }

    #[test]
    fn refusals_have_one_code_each() {
        assert_eq!(
            acquire_refusal(LockError::InvalidName(KeyError::Empty)),
            lock::NAME_EMPTY
        );
        assert_eq!(
            acquire_refusal(LockError::InvalidName(KeyError::TooLong(600))),
            lock::NAME_TOO_LONG
        );
        for (error, code) in [
            (OptionError::WaitMs(-1.0), lock::BAD_WAIT),
            (OptionError::StaleMs(0.0), lock::BAD_STALE),
            (OptionError::MaxClockSkewMs(-1.0), lock::BAD_SKEW),
            (OptionError::StoreTimeoutMs(0.0), lock::BAD_STORE_TIMEOUT),
            (OptionError::Concurrency(0.5), lock::BAD_CONCURRENCY),
        ] {
            assert_eq!(option_refusal(error), code);
            assert_eq!(acquire_refusal(LockError::InvalidOption(error)), code);
        }
        assert_eq!(
            enqueue_refusal(EnqueueError::QueueFull { max_pending: 1 }),
            serializer::QUEUE_FULL
        );
        assert_eq!(
            enqueue_refusal(EnqueueError::InvalidKey(KeyError::Empty)),
            serializer::KEY_EMPTY
        );
        assert_eq!(
            enqueue_refusal(EnqueueError::TooManyWorks),
            serializer::TOO_MANY
        );
    }

    #[test]
    fn a_line_change_and_a_caller_giving_up_are_bits() {
        let mut core = SerializerCore::new(SerializerOptions::default(), true, true);
        let ticket = core.open("k", (), None, Coalesce::Never).unwrap().ticket;
        let next = Released {
            next: Some(ticket),
            idle: false,
        };
        let idle = Released {
            next: None,
            idle: true,
        };
        assert_eq!(line_change(&next), serializer::NEXT as u32);
        assert_eq!(line_change(&idle), serializer::IDLE as u32);
        assert_eq!(
            gave_up(GaveUp::Left(idle)),
            serializer::LEFT as u32 | serializer::IDLE as u32
        );
        assert_eq!(gave_up(GaveUp::Abandoned), serializer::ABANDONED as u32);
        assert_eq!(gave_up(GaveUp::Nothing), 0);
        assert_eq!(acquired(&Acquired::Run(())), turns::RUN);
        assert_eq!(acquired(&Acquired::<()>::TimeOut), turns::TIME_OUT);
    }

    #[test]
    fn counters_come_in_the_order_of_their_names() {
        let stats = Stats {
            keys: 1,
            running: 2,
            waiting: 3,
            started: 4,
            timed_out: 5,
            aborted: 6,
            refused: 7,
            late_settled: 8,
            coalesced: 9,
        };
        assert_eq!(
            serializer_stats(&stats),
            (1..=wire::serializer::STATS.len())
                .map(|n| n as f64)
                .collect::<Vec<_>>()
        );
        let lock = LockStats {
            held: 1,
            waiting: 2,
            acquisitions: 3,
            hand_offs: 4,
            takeovers: 5,
            store_calls: 6,
            store_failures: 7,
            store_timeouts: 8,
            read_backs_applied: 9,
            watches: 10,
            wake_ups: 11,
            polls_saved: 12,
        };
        for index in 0..wire::lock::STATS.len() as u32 {
            assert_eq!(lock_stat(&lock, index), f64::from(index + 1));
        }
        assert_eq!(lock_stat(&lock, 12), 0.0, "past the names");
    }
}
