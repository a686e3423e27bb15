//! The current process id, cheaply: `getpid` is a system call (glibc stopped caching it), and
//! the recorder checks its owner on every call. The id is cached and the cache is cleared in a
//! forked child by a `pthread_atfork` handler, so the check costs one atomic load.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

static CACHED: AtomicU32 = AtomicU32::new(0);
static HANDLER: Once = Once::new();

#[cfg(unix)]
extern "C" fn forget_in_child() {
    CACHED.store(0, Ordering::Relaxed);
}

/// Checks that the calling process is `owner`, the one that made a recorder: its writer thread
/// and file exist in no other (a forked child).
///
/// Errors: `ForeignProcess`.
pub fn check_owner(owner: u32) -> crate::Result<()> {
    if current_pid() != owner {
        return Err(crate::Error::ForeignProcess { owner });
    }
    Ok(())
}

/// The id of the calling process.
pub fn current_pid() -> u32 {
    HANDLER.call_once(|| {
        #[cfg(unix)]
        // SAFETY: registers a handler that only stores to an atomic, which is async-signal-safe
        // and so allowed in a child between fork and exec.
        unsafe {
            libc::pthread_atfork(None, None, Some(forget_in_child));
        }
    });
    match CACHED.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            CACHED.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_system() {
        assert_eq!(super::current_pid(), std::process::id());
        assert_eq!(super::current_pid(), std::process::id());
    }
}
