//! Reproducible random sampling of steps and windows from an `EpisodeSet`.
//!
//! The generator is SplitMix64 (Steele, Lea & Flood 2014): one 64-bit state, statistically
//! sound for sampling and trivially reproducible across platforms, so a seed names a batch on
//! every machine. Integers below a bound use Lemire's multiply-shift with rejection, which is
//! exactly uniform. Sampling is with replacement, uniform over steps (transitions) or over
//! windows (sequences): every step, or every window, is equally likely.

use super::gather::Window;
use super::steps::EpisodeSet;
use crate::error::{Error, Result};

/// SplitMix64.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        if (m as u64) < n {
            // Reject the few low products that would make some results more likely.
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = (self.next_u64() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }
}

/// `n` steps drawn uniformly (with replacement) from the set's steps, as one-step windows.
pub fn sample_steps(set: &EpisodeSet, n: usize, seed: u64) -> Result<Vec<Window>> {
    let total = set.num_steps();
    if total == 0 && n > 0 {
        return Err(Error::Invalid(format!("cannot sample transitions: the {} episodes hold no step", set.len())));
    }
    let mut rng = SplitMix64::new(seed);
    let steps: Vec<u64> = (0..n).map(|_| rng.below(total)).collect();
    Ok(set.locate_steps(&steps)?.into_iter().map(|(episode, start)| Window { episode, start }).collect())
}

/// `n` windows of `length` steps drawn uniformly (with replacement) from the windows inside the
/// set's episodes (see `WindowIndex` for `pad`).
pub fn sample_windows(set: &EpisodeSet, n: usize, length: u64, pad: bool, seed: u64) -> Result<Vec<Window>> {
    let windows = set.windows(length, pad)?;
    let total = windows.num_windows();
    if total == 0 && n > 0 {
        let hint = if pad { "" } else { " (pad=True keeps shorter episodes, padded with a mask)" };
        return Err(Error::Invalid(format!(
            "cannot sample sequences of {length} steps: none of the {} episodes is that long{hint}",
            set.len()
        )));
    }
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let (episode, start) = set.locate_window(&windows, rng.below(total))?;
            Ok(Window { episode, start })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // First outputs for seed 1234567 from the reference implementation (Vigna's splitmix64.c).
        let mut rng = SplitMix64::new(1234567);
        let got: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(got, [6457827717110365317, 3203168211198807973, 9817491932198370423]);
    }

    #[test]
    fn below_is_in_range_and_covers_it() {
        let mut rng = SplitMix64::new(0);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[rng.below(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        assert_eq!(SplitMix64::new(5).below(1), 0);
    }

    #[test]
    fn sampling_is_reproducible_and_stays_in_range() {
        let set = EpisodeSet::subset(vec![0, 1, 2], [4, 1, 6]);
        let a = sample_steps(&set, 100, 42).unwrap();
        let b = sample_steps(&set, 100, 42).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, sample_steps(&set, 100, 43).unwrap());
        let lengths = [4, 1, 6];
        assert!(a.iter().all(|w| w.start < lengths[w.episode]));
        let seq = sample_windows(&set, 100, 3, false, 7).unwrap();
        assert!(seq.iter().all(|w| w.episode != 1 && w.start + 3 <= lengths[w.episode]));
        assert!(sample_windows(&set, 1, 7, false, 7).is_err());
        assert!(sample_windows(&set, 1, 7, true, 7).unwrap()[0].start == 0);
        assert!(sample_steps(&EpisodeSet::subset(vec![], []), 1, 0).is_err());
        assert!(sample_steps(&EpisodeSet::subset(vec![], []), 0, 0).unwrap().is_empty());
    }
}
