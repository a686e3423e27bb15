//! When a refresh looks at the closed shards for changes in place. A closed shard is never
//! written again: a change to one (truncated, or rewritten by `cp` or `rsync --inplace`) is
//! someone else's doing, and a refresh says so (`Shard::check_changed`). Looking costs a
//! `stat` per shard; a learner refreshes at every training step, and a refresh must cost what
//! it found, not what the dataset holds. So a refresh looks at the closed shards unless one
//! looked less than `CLOSED_CHECK_EVERY` ago: a change in place is said at most that long
//! after it happened (at once by the first refresh after opening, or after a pause). The
//! shards still written are looked at by every refresh (their growth is what it reads).

use std::time::{Duration, Instant};

/// How stale a refresh's view of the closed shards may be: half the freshness a learner is
/// promised for new rows (`docs/replay-buffer.md`).
pub(crate) const CLOSED_CHECK_EVERY: Duration = Duration::from_millis(50);

/// Whether a refresh at `now` looks at the closed shards, the last refresh that did having been
/// at `last` (None: none did since opening).
pub(crate) fn check_closed(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|at| now.saturating_duration_since(at) >= CLOSED_CHECK_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_a_refresh_looks_at_the_closed_shards() {
        let t0 = Instant::now();
        let ms = |n: u64| Duration::from_millis(n);
        let table: &[(&str, Option<Instant>, Instant, bool)] = &[
            ("the first refresh after opening", None, t0, true),
            ("looked just before", Some(t0), t0 + ms(1), false),
            ("looked an interval ago", Some(t0), t0 + CLOSED_CHECK_EVERY, true),
            ("looked long ago", Some(t0), t0 + ms(5_000), true),
            ("a clock that went back (never: Instant is monotonic)", Some(t0 + ms(10)), t0, false),
        ];
        for &(name, last, now, want) in table {
            assert_eq!(check_closed(last, now), want, "{name}");
        }
    }
}
