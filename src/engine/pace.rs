//! A serializer's pace: at most `limit` works of a key start in any window of `period_ms`
//! milliseconds — a window that slides over start times, not a fixed one, so no burst at a
//! window's edge lets `2 × limit` through.
//!
//! A key's last `limit` start times outlive its line: a key that went idle and is called again
//! within the period waits as if it had stayed busy. They are forgotten once the period has
//! passed over the newest, lazily (each start is also noted in one list in time order, and the
//! list's front is looked at whenever the pace is), so an idle serializer keeps no timer for
//! them, and what it keeps is bounded by the starts of the last period.
//!
//! A line whose next work must wait for its pace is noted with the time it may start: the
//! engine's timers wake it then.

use std::collections::VecDeque;
use std::rc::Rc;

use super::deadlines::Deadlines;
use super::keymap::KeyMap;
use super::options::Rate;
use super::queue::{LineId, Ticket};

/// One key's recent starts.
struct Window {
    key: Rc<str>,
    /// Its last starts, at most `limit`, in a ring: the oldest at `oldest` once it is full.
    starts: Vec<f64>,
    oldest: usize,
    /// Its last start.
    newest: f64,
    /// When its line's next work may start, if the line waits for its pace (∞: it does not).
    wait_at: f64,
    /// The work its line waited for last, so that a work that waits is counted once.
    waited: Option<Ticket>,
}

/// The pace of one serializer's keys.
pub(crate) struct Pace {
    rate: Rate,
    /// Keys that started a work within the last period, to their windows.
    index: KeyMap,
    windows: Vec<Window>,
    /// Each start, in time order, with its key: what lets windows go once the period passed.
    spent: VecDeque<(f64, Rc<str>)>,
    /// Lines waiting for their pace, by when they may start (entries of lines that no longer
    /// wait for that time are dead; see `Deadlines`).
    waits: Deadlines<LineId>,
    waiting: usize,
    /// Works that had to wait for their pace.
    pub(crate) paced: u64,
}

impl Pace {
    pub(crate) fn new(rate: Rate) -> Self {
        Pace {
            rate,
            index: KeyMap::default(),
            windows: Vec::new(),
            spent: VecDeque::new(),
            waits: Deadlines::default(),
            waiting: 0,
            paced: 0,
        }
    }

    fn window(&self, key: &str) -> Option<&Window> {
        self.windows.get(*self.index.get(key)? as usize)
    }

    fn window_mut(&mut self, key: &str) -> Option<&mut Window> {
        self.windows.get_mut(*self.index.get(key)? as usize)
    }

    /// When the next work of `key` may start by its pace: at or before `now` when it may now.
    pub(crate) fn next_start(&mut self, key: &str, now: f64) -> f64 {
        self.forget(now);
        let (limit, period) = (self.rate.limit as usize, self.rate.period_ms);
        match self.window(key) {
            Some(window) if window.starts.len() >= limit => window
                .starts
                .get(window.oldest)
                .map_or(now, |oldest| oldest + period),
            _ => now,
        }
    }

    /// A work of `key` started at `now`.
    pub(crate) fn started(&mut self, key: &Rc<str>, now: f64) {
        self.forget(now);
        let limit = self.rate.limit as usize;
        let at = match self.index.get(key) {
            Some(&at) => at as usize,
            None => {
                self.index.insert(key.clone(), self.windows.len() as u32);
                self.windows.push(Window {
                    key: key.clone(),
                    starts: Vec::new(),
                    oldest: 0,
                    newest: now,
                    wait_at: f64::INFINITY,
                    waited: None,
                });
                self.windows.len() - 1
            }
        };
        if let Some(window) = self.windows.get_mut(at) {
            let full = window.starts.len() >= limit;
            match window.starts.get_mut(window.oldest) {
                Some(oldest) if full => {
                    *oldest = now;
                    window.oldest = (window.oldest + 1) % limit;
                }
                _ => window.starts.push(now),
            }
            window.newest = now;
            if window.wait_at.is_finite() {
                window.wait_at = f64::INFINITY;
                self.waiting = self.waiting.saturating_sub(1);
            }
        }
        self.spent.push_back((now, key.clone()));
    }

    /// The newest start of `key` was made at `at`, not before: its host called the work then
    /// (what ran between the engine's start and the call — a garbage collection — would
    /// otherwise open the next window early).
    pub(crate) fn restamp(&mut self, key: &Rc<str>, at: f64) {
        let limit = self.rate.limit as usize;
        let Some(window) = self.window_mut(key) else {
            return;
        };
        let newest = match window.starts.len() {
            len if len < limit => len.checked_sub(1),
            _ => Some((window.oldest + limit - 1) % limit),
        };
        let Some(start) = newest.and_then(|newest| window.starts.get_mut(newest)) else {
            return;
        };
        if at > *start {
            *start = at;
            window.newest = window.newest.max(at);
            // Its window is let go a period after this start, not the one first noted.
            self.spent.push_back((at, key.clone()));
        }
    }

    /// `line` (of `key`) waits for its pace until `at`, its first work that has not started
    /// being `work`; `key_of` names a line's key.
    pub(crate) fn wait<'k>(
        &mut self,
        key: &str,
        line: LineId,
        at: f64,
        work: Ticket,
        key_of: impl Fn(LineId) -> Option<&'k str>,
    ) {
        let Some(&slot) = self.index.get(key) else {
            return;
        };
        let Some(window) = self.windows.get_mut(slot as usize) else {
            return;
        };
        if window.waited != Some(work) {
            window.waited = Some(work);
            self.paced += 1;
        }
        if window.wait_at == at {
            return;
        }
        if !window.wait_at.is_finite() {
            self.waiting += 1;
        }
        window.wait_at = at;
        let (index, windows) = (&self.index, &self.windows);
        let live = self.waiting;
        self.waits.push(at, line, live, |entry| {
            is_waiting(index, windows, entry, &key_of)
        });
    }

    /// When the first line waiting for its pace may start, if any; `key_of` names a line's key.
    pub(crate) fn next_wait<'k>(
        &mut self,
        key_of: impl Fn(LineId) -> Option<&'k str>,
    ) -> Option<f64> {
        let (index, windows) = (&self.index, &self.windows);
        self.waits
            .first(|entry| is_waiting(index, windows, entry, &key_of))
            .map(|(at, _)| at)
    }

    /// A line whose pace came by `now`, if any: it waits no more (the engine starts its next
    /// work, or notes it again if it must wait longer).
    pub(crate) fn due<'k>(
        &mut self,
        now: f64,
        key_of: impl Fn(LineId) -> Option<&'k str>,
    ) -> Option<LineId> {
        let (index, windows) = (&self.index, &self.windows);
        let (at, line) = self
            .waits
            .first(|entry| is_waiting(index, windows, entry, &key_of))?;
        if at > now {
            return None;
        }
        self.waits.pop();
        if let Some(window) = key_of(line).and_then(|key| self.window_mut(key)) {
            window.wait_at = f64::INFINITY;
            self.waiting = self.waiting.saturating_sub(1);
        }
        Some(line)
    }

    /// Lets go of the windows the period has passed over (their newest start is a period old)
    /// and whose lines do not wait.
    fn forget(&mut self, now: f64) {
        let period = self.rate.period_ms;
        while let Some((at, _)) = self.spent.front() {
            if at + period > now {
                return;
            }
            let Some((_, key)) = self.spent.pop_front() else {
                return;
            };
            let Some(&slot) = self.index.get(&key) else {
                continue;
            };
            let old = self
                .windows
                .get(slot as usize)
                .is_some_and(|window| !window.wait_at.is_finite() && window.newest + period <= now);
            if old {
                // The last window takes its place (no `swap_remove`: its panic path formats).
                self.index.remove(&key);
                let last = self.windows.pop();
                if let (Some(last), Some(place)) = (last, self.windows.get_mut(slot as usize)) {
                    self.index.insert(last.key.clone(), slot);
                    *place = last;
                }
            }
        }
    }

    /// Whether a line waits for its pace.
    pub(crate) fn waits(&self) -> bool {
        self.waiting > 0
    }

    /// `key`'s line went idle: it waits for nothing.
    pub(crate) fn idle(&mut self, key: &str) {
        if let Some(window) = self
            .window_mut(key)
            .filter(|window| window.wait_at.is_finite())
        {
            window.wait_at = f64::INFINITY;
            self.waiting = self.waiting.saturating_sub(1);
        }
    }

    /// Keys whose recent starts are kept (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn windows(&self) -> usize {
        self.windows.len()
    }
}

/// Whether a wait entry is its line's current one (an idle line's is not).
fn is_waiting<'k>(
    index: &KeyMap,
    windows: &[Window],
    (at, line): (f64, LineId),
    key_of: impl Fn(LineId) -> Option<&'k str>,
) -> bool {
    let Some(key) = key_of(line) else {
        return false;
    };
    index
        .get(key)
        .and_then(|&slot| windows.get(slot as usize))
        .is_some_and(|window| window.wait_at == at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(limit: u32, period_ms: f64) -> Pace {
        Pace::new(Rate { limit, period_ms })
    }

    #[test]
    fn a_window_slides_over_start_times() {
        let mut pace = pace(2, 100.0);
        let key: Rc<str> = Rc::from("k");
        assert_eq!(pace.next_start(&key, 0.0), 0.0);
        pace.started(&key, 0.0);
        pace.started(&key, 40.0);
        assert_eq!(pace.next_start(&key, 50.0), 100.0, "two in (0, 100]");
        pace.started(&key, 100.0);
        assert_eq!(
            pace.next_start(&key, 100.0),
            140.0,
            "the start at 40 leaves next"
        );
        assert_eq!(
            pace.next_start("other", 100.0),
            100.0,
            "keys are paced apart"
        );
    }

    #[test]
    fn windows_a_period_old_are_let_go() {
        let mut pace = pace(3, 100.0);
        for i in 0..1000 {
            let key: Rc<str> = Rc::from(format!("k{i}"));
            pace.started(&key, f64::from(i));
        }
        assert_eq!(pace.windows(), 100, "the keys of the last period only");
        pace.next_start("k0", 5000.0);
        assert_eq!(pace.windows(), 0);
        assert!(pace.spent.is_empty());
        assert_eq!(pace.index.len(), 0);
    }

    #[test]
    fn a_waiting_line_keeps_its_window_until_it_starts_or_goes_idle() {
        let mut pace = pace(1, 100.0);
        let key: Rc<str> = Rc::from("k");
        pace.started(&key, 0.0);
        let line = LineId(0);
        let key_of = |_: LineId| Some("k");
        pace.wait(&key, line, 100.0, Ticket::new(1, 1), key_of);
        assert_eq!(pace.paced, 1);
        pace.wait(&key, line, 100.0, Ticket::new(1, 1), key_of);
        assert_eq!(pace.paced, 1, "a work is counted once");
        pace.next_start("other", 500.0);
        assert_eq!(pace.windows(), 1, "kept while its line waits");
        assert_eq!(pace.next_wait(key_of), Some(100.0));
        assert_eq!(pace.due(99.0, key_of), None);
        assert_eq!(pace.due(100.0, key_of), Some(line));
        assert_eq!(pace.due(100.0, key_of), None, "once");
        pace.wait(&key, line, 600.0, Ticket::new(1, 1), key_of);
        pace.idle(&key);
        assert_eq!(
            pace.next_wait(key_of),
            None,
            "an idle line waits for nothing"
        );
        pace.started(&key, 700.0);
        pace.next_start("other", 2000.0);
        assert_eq!(pace.windows(), 0);
    }
}
