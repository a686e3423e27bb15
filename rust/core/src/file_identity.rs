//! What identifies a file whatever its name: (device, inode). A reader checks that a shard it
//! holds is still the file it opened; an upload checks that the file it streams is the shard it
//! named.

/// (device, inode) of a file's metadata.
pub(crate) fn identity_of(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}
