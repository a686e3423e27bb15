//! How long `close` keeps trying what the store refused of a bounded recording's evictions
//! (its eviction log, the evicted shards' objects): a store that recovers within seconds (S3's
//! `SlowDown`, a restart behind a load balancer) leaves no object behind, and one that does
//! not is said by name, never waited on longer. The tries are counted from the last one that
//! got a deletion through (`uploads` starts them afresh then): a store that answers slowly
//! is not cut short, one that refuses everything is; there is only so much to delete. Each
//! request has the store client's timeouts and retries, so the last try ends within those.

use std::time::Duration;

/// The wait after the first failed try; each next one is twice the last, up to `LONGEST`.
const FIRST: Duration = Duration::from_millis(50);
const LONGEST: Duration = Duration::from_secs(1);
/// No try starts later than this after the first of the tries that failed in a row.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// The wait before the next try, `failed` tries having failed, the first of them `since` ago;
/// `None`: no more tries (the next would start past the deadline).
pub fn next_try(failed: u32, since: Duration) -> Option<Duration> {
    let doublings = failed.saturating_sub(1).min(16);
    let wait = FIRST.saturating_mul(1 << doublings).min(LONGEST);
    (since + wait <= DEADLINE).then_some(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_back_off_and_end_at_the_deadline() {
        let ms = Duration::from_millis;
        // (tries failed, since the first failed, the wait before the next)
        let cases: &[(u32, Duration, Option<Duration>)] = &[
            (1, ms(0), Some(ms(50))),
            (2, ms(50), Some(ms(100))),
            (3, ms(150), Some(ms(200))),
            (5, ms(750), Some(ms(800))),
            (6, ms(1550), Some(ms(1000))),
            (40, ms(3000), Some(ms(1000))),
            // The next would start past the deadline: none.
            (9, ms(4500), None),
            (1, DEADLINE, None),
            (1, DEADLINE - ms(50), Some(ms(50))),
            (u32::MAX, ms(0), Some(ms(1000))),
        ];
        for &(failed, since, want) in cases {
            assert_eq!(next_try(failed, since), want, "{failed} failed, {since:?}");
        }
        // However the tries go, they end: at most the deadline over the shortest wait.
        let (mut failed, mut since) = (1, Duration::ZERO);
        while let Some(wait) = next_try(failed, since) {
            (failed, since) = (failed + 1, since + wait);
        }
        assert!(since <= DEADLINE && failed < 20, "{failed} tries over {since:?}");
    }
}
