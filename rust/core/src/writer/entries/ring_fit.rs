//! No call blocks forever. Every message goes through the ring, and a wait for ring space ends
//! only when the writer thread frees enough of it: a message longer than the ring would wait for
//! ever. So each message is measured against the ring before any wait, and one that can never fit
//! is refused at once, naming its size and the option that sets the ring's (`ring_bytes`). Every
//! other wait in the put path ends: the writer frees all the ring in time while it runs, and the
//! waits end when it stops (`Recorder::wait_while`).

use crate::error::{Error, Result};

/// Whether a message of `len` bytes (`what` names it: "one step", "episode metadata") can ever
/// fit a ring of `capacity` bytes; `Error::Invalid` saying so when it cannot.
pub fn check_fits(what: &str, len: usize, capacity: usize) -> Result<()> {
    // Message lengths are stored as u32: a longer one could not be framed even in a larger ring.
    if len <= capacity && u32::try_from(len).is_ok() {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "{what} of {len} bytes does not fit the recording buffer of {capacity} bytes, now or ever (raise ring_bytes, or record \
         less at once)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_messages_against_the_ring() {
        let table = [
            (0usize, 65_536usize, true),
            (65_536, 65_536, true),
            (65_537, 65_536, false),
            (50 << 20, 1 << 20, false),
            (u32::MAX as usize, usize::MAX, true),
            (u32::MAX as usize + 1, usize::MAX, false),
        ];
        for (len, capacity, fits) in table {
            let got = check_fits("episode metadata", len, capacity);
            assert_eq!(got.is_ok(), fits, "{len} bytes in {capacity}");
            if let Err(e) = got {
                let text = e.to_string();
                assert!(text.contains(&format!("episode metadata of {len} bytes")), "{text}");
                assert!(text.contains("ring_bytes") && text.contains(&capacity.to_string()), "{text}");
            }
        }
    }
}
