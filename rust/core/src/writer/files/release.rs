//! Gives the pages of the writer's freed buffers back to the OS. A lane's rows are buffered for
//! up to a flush interval, sealed, written and freed; glibc keeps freed pages resident in the
//! writer thread's arena, and the next interval's buffers land on other pages, so the peak grew
//! with the recording's pace (one CartPole env, 200k steps: 8.4 to 11.0 MB of growth at 37k to
//! 59k steps/s, 7.1 to 8.0 MB with the pages given back: docs/BENCHMARKS.md, issue 14).

use std::time::{Duration, Instant};

/// At most this often: `malloc_trim` walks the free lists of every arena.
const EVERY: Duration = Duration::from_secs(1);
/// A trim that took longer stops them: the process's other arenas (the host's heap) are large
/// and fragmented, and each trim locks them while it walks them (6 to 18 ms on a 100 to 200 MB
/// fragmented heap), which could stall the env loop's allocations more than the pages are worth.
const AT_MOST: Duration = Duration::from_millis(1);

pub struct FreedPages {
    last: Instant,
    enabled: bool,
}

impl Default for FreedPages {
    fn default() -> Self {
        FreedPages { last: Instant::now(), enabled: cfg!(all(target_os = "linux", target_env = "gnu")) }
    }
}

impl FreedPages {
    /// After a cycle wrote what was buffered: the freed pages go back, at most every `EVERY`.
    pub fn release(&mut self) {
        if !self.enabled || self.last.elapsed() < EVERY {
            return;
        }
        let started = Instant::now();
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only returns free memory of the allocator to the OS.
        unsafe {
            libc::malloc_trim(0);
        }
        self.last = Instant::now();
        self.enabled = self.last - started <= AT_MOST;
    }
}
