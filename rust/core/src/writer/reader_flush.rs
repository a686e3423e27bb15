//! When a refresh in the recording process makes the recorder flush, and whether it waits.
//!
//! The promise (docs/replay-buffer.md): a reader of this process sees every step that returned
//! at least `FRESHNESS_NS` before its refresh. A flush covers every step pushed before it was
//! requested, so the promise holds once a flush requested at most `FRESHNESS_NS` ago is written.
//! A refresh therefore asks for a flush every `REQUEST_EVERY_NS` without waiting for it, and
//! waits only when no written flush is recent enough: while the writer finishes a flush within
//! `FRESHNESS_NS - REQUEST_EVERY_NS`, the learner never blocks on the writer thread. Nothing here
//! does I/O or reads a clock, so table tests cover every case.

/// How old a step may be (at the refresh) and still not be listed.
pub const FRESHNESS_NS: u64 = 100_000_000;
/// How often refreshes ask for a flush: half the freshness, so the one asked a period before
/// has that long to be written before anyone waits for it.
pub const REQUEST_EVERY_NS: u64 = 50_000_000;
/// Requests kept: the newest written one and those not written yet. A request is only made
/// while a written one is at most `FRESHNESS_NS` old, and requests are `REQUEST_EVERY_NS` apart,
/// so at most three are ever outstanding; beyond the cap the oldest is forgotten (a refresh
/// then waits for a newer one, never for less).
const KEPT: usize = 4;

/// A flush a refresh asked for: its ticket and when it was pushed (ns on the caller's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requested {
    pub ticket: u64,
    pub at_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderFlush {
    /// A written flush is recent enough and one was asked for less than a period ago.
    Nothing,
    /// Ask for a flush and go on: a written one is recent enough.
    Request,
    /// Ask for a flush and wait for it: none written or outstanding is recent enough.
    RequestAndWait,
    /// Wait until this outstanding ticket is written: it is recent enough.
    WaitFor(u64),
}

/// What a refresh at `now_ns` does, given the `requests` made so far (oldest first, as kept by
/// [`ReaderFlushes`]) and the newest ticket the writer has written (`flushed`).
pub fn decide(now_ns: u64, requests: &[Requested], flushed: u64) -> ReaderFlush {
    let oldest_allowed = now_ns.saturating_sub(FRESHNESS_NS);
    let recent = |r: &&Requested| r.at_ns >= oldest_allowed;
    if requests.iter().filter(recent).any(|r| r.ticket <= flushed) {
        let due = requests.last().is_none_or(|r| now_ns.saturating_sub(r.at_ns) >= REQUEST_EVERY_NS);
        return if due { ReaderFlush::Request } else { ReaderFlush::Nothing };
    }
    match requests.iter().filter(recent).find(|r| r.ticket > flushed) {
        Some(r) => ReaderFlush::WaitFor(r.ticket),
        None => ReaderFlush::RequestAndWait,
    }
}

/// The bounded record of the refreshes' requests that [`decide`] reads.
#[derive(Debug, Default)]
pub struct ReaderFlushes {
    requests: Vec<Requested>,
}

impl ReaderFlushes {
    pub fn decide(&self, now_ns: u64, flushed: u64) -> ReaderFlush {
        decide(now_ns, &self.requests, flushed)
    }

    /// Records a request just pushed, forgetting the written ones but the newest.
    pub fn requested(&mut self, request: Requested, flushed: u64) {
        let newest_written = self.requests.iter().rposition(|r| r.ticket <= flushed);
        if let Some(i) = newest_written {
            self.requests.drain(..i);
        }
        if self.requests.len() == KEPT {
            self.requests.remove(0);
        }
        self.requests.push(request);
    }
}

#[cfg(test)]
mod tests {
    use super::ReaderFlush::*;
    use super::*;

    const MS: u64 = 1_000_000;

    fn req(ticket: u64, at_ms: u64) -> Requested {
        Requested { ticket, at_ns: at_ms * MS }
    }

    /// Now (ms), the requests as (ticket, at ms), the flushed ticket, the decision.
    type Row<'a> = (u64, &'a [(u64, u64)], u64, ReaderFlush);

    #[test]
    fn decisions() {
        let table: &[Row] = &[
            // Never asked: ask and wait (the steps so far must show).
            (500, &[], 0, RequestAndWait),
            // A written one 40 ms old, asked 40 ms ago: nothing.
            (540, &[(1, 500)], 1, Nothing),
            // A period after the last request: ask, do not wait.
            (550, &[(1, 500)], 1, Request),
            // Exactly the freshness old still covers.
            (600, &[(1, 500), (2, 550)], 1, Request),
            (620, &[(1, 500), (2, 550), (3, 600)], 1, WaitFor(2)),
            // The written one too old, the outstanding one recent: wait for that, not a new one.
            (640, &[(1, 500), (2, 550), (3, 600)], 2, Nothing),
            (660, &[(1, 500), (2, 600)], 1, WaitFor(2)),
            // Several outstanding: the oldest recent enough is waited for.
            (660, &[(1, 500), (2, 570), (3, 620)], 1, WaitFor(2)),
            (690, &[(1, 500), (2, 580), (3, 630)], 1, WaitFor(3)),
            // Everything known too old, written or not: ask and wait.
            (800, &[(1, 500), (2, 600)], 1, RequestAndWait),
            (800, &[(1, 500), (2, 600)], 2, RequestAndWait),
            // A user's flush (a later ticket) written: the requests before it are written too.
            (640, &[(1, 500), (2, 550), (3, 600)], 9, Nothing),
            // The first 100 ms of the clock: a request at 0 is recent enough.
            (60, &[(1, 0)], 1, Request),
        ];
        for &(now, requests, flushed, want) in table {
            let requests: Vec<Requested> = requests.iter().map(|&(t, at)| req(t, at)).collect();
            assert_eq!(decide(now * MS, &requests, flushed), want, "{now} {requests:?} {flushed}");
        }
    }

    /// A refresh every ms for a second, with the writer writing each flush `lag` ms after it was
    /// asked for: how long the learner waits in all, and every refresh sees every step 100 ms old.
    fn run(lag_ms: u64) -> u64 {
        let mut flushes = ReaderFlushes::default();
        let mut asked: Vec<Requested> = Vec::new();
        let (mut now, mut waited, mut next_ticket) = (0, 0, 1);
        // The newest ticket written at `t`: each is written `lag` after it was asked for.
        let flushed_at = |asked: &[Requested], t: u64| {
            asked.iter().filter(|r| r.at_ns + lag_ms * MS <= t).map(|r| r.ticket).max().unwrap_or(0)
        };
        while now < 1000 * MS {
            let wait_for = match flushes.decide(now, flushed_at(&asked, now)) {
                Nothing => None,
                WaitFor(ticket) => Some(ticket),
                d @ (Request | RequestAndWait) => {
                    let r = Requested { ticket: next_ticket, at_ns: now };
                    next_ticket += 1;
                    flushes.requested(r, flushed_at(&asked, now));
                    asked.push(r);
                    (d == RequestAndWait).then_some(r.ticket)
                }
            };
            let start = now;
            if let Some(ticket) = wait_for {
                now = asked.iter().find(|r| r.ticket == ticket).unwrap().at_ns + lag_ms * MS;
                waited += now - start;
            }
            // What this refresh lists: every step before the newest written flush was asked for.
            let seen = asked.iter().filter(|r| r.ticket <= flushed_at(&asked, now)).map(|r| r.at_ns).max();
            assert!(seen.is_some_and(|s| s >= start.saturating_sub(FRESHNESS_NS)), "{start} {seen:?}");
            assert!(flushes.requests.len() <= KEPT);
            now += MS;
        }
        waited
    }

    #[test]
    fn a_writer_within_half_the_freshness_is_never_waited_for() {
        // Only the first refresh waits (nothing was flushed yet).
        assert_eq!(run(1), MS);
        assert_eq!(run(49), 49 * MS);
    }

    #[test]
    fn a_slow_writer_is_waited_for_only_as_the_promise_needs() {
        // A flush takes 80 ms, longer than a period: waiting is needed, but not at every
        // request (waiting for each flush asked every 50 ms would wait 80 ms of every 81).
        let waited = run(80);
        assert!(waited > 0 && waited <= 1000 * MS * 8 / 10, "{waited}");
    }

    #[test]
    fn the_record_keeps_the_newest_written_and_the_outstanding() {
        let mut f = ReaderFlushes::default();
        for t in 1..=3 {
            f.requested(req(t, t * 50), 0);
        }
        f.requested(req(4, 200), 2);
        assert_eq!(f.requests, vec![req(2, 100), req(3, 150), req(4, 200)]);
        f.requested(req(5, 250), 2);
        f.requested(req(6, 300), 2);
        assert_eq!(f.requests.len(), KEPT);
        assert_eq!(f.requests.first(), Some(&req(3, 150)));
    }
}
