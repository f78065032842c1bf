//! The engine: every rule, state and timer of keyturn in one machine that makes no call of any
//! kind — no store, no clock (the time is an argument), no timer, no host code.

pub(crate) mod asks;
pub(crate) mod deadlines;
pub(crate) mod key;
pub(crate) mod keymap;
pub(crate) mod leases;
pub(crate) mod messages;
pub(crate) mod options;
pub(crate) mod queue;
pub(crate) mod random;
pub(crate) mod record;
pub(crate) mod slots;
pub(crate) mod turns;
pub(crate) mod works;
