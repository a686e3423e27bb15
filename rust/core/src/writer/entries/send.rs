//! Sending one call's collected entries (`Collector`) as a message: planned, then sent at once
//! when the ring has room, else after the caller's wait, which runs with none of the entries
//! borrowed (the bindings release the GIL there, so a borrowed array could change meanwhile).

use super::collect::Collector;
use crate::writer::message::MessageKind;
use crate::writer::recorder::Recorder;
use crate::Result;

impl Recorder {
    /// Plans the entries of `coll` as a `kind` message (a Reset starts the envs of the
    /// collector's `head_mask`) and sends it; when the ring has no room for its `len` bytes yet,
    /// `wait(self, len)` waits for them first.
    // Inlined into the bindings' reset and step: as a call of its own it added to the
    // instructions of each step.
    #[inline(always)]
    pub fn send_collected<K>(
        &mut self,
        coll: &Collector<K>,
        kind: MessageKind,
        wait: impl FnOnce(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        let entries = coll.entries();
        let len = match kind {
            MessageKind::Reset => self.plan_reset(&entries, coll.head_mask.map(|m| coll.slice(m)))?,
            _ => self.plan_step(&entries)?,
        };
        if self.ready(len) {
            return self.send_planned(&entries, 0);
        }
        drop(entries);
        wait(self, len)?;
        self.send_planned(&coll.entries(), 0)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::writer::entries::collect::Place;
    use crate::writer::{Faults, RecorderConfig};

    #[test]
    fn messages_wait_for_the_ring_only_when_it_is_full() {
        let dir = tempfile::tempdir().unwrap();
        let config = json!({
            "columns": [
                {"id": 0, "name": "obs/x", "dtype": "uint8", "shape": [8192], "timeline": "obs"},
                {"id": 0, "name": "action/a", "dtype": "int64", "shape": [], "timeline": "step"},
            ],
            "observation": {"dict": [["x", {"leaf": "obs/x"}]]},
            "action": {"dict": [["a", {"leaf": "action/a"}]]},
            "ring_bytes": 65536,
        });
        let config = RecorderConfig::from_json(&config.to_string()).unwrap();
        // A writer slower than the steps: the ring fills.
        let faults = Faults { slow_step_ms: 20, ..Faults::default() };
        let mut rec = Recorder::create_with_faults(dir.path(), config, faults).unwrap();
        let (obs, action) = (rec.column_id("obs/x").unwrap(), rec.column_id("action/a").unwrap());
        let [reward, terminated, truncated] = rec.role_columns();
        let mut coll = Collector::<()>::default();
        let mut waits = 0;
        let at = Place::regular(None);
        for step in 0..=16u64 {
            let x = coll.own(&[step as u8; 8192]);
            coll.push(obs, at, None, x);
            let kind = if step == 0 { MessageKind::Reset } else { MessageKind::Step };
            if step > 0 {
                let values = [(action, 1i64.to_le_bytes().to_vec()), (reward, 0.5f64.to_le_bytes().to_vec())];
                for (column, bytes) in values.into_iter().chain([(terminated, vec![0]), (truncated, vec![0])]) {
                    let data = coll.own(&bytes);
                    coll.push(column, at, None, data);
                }
            }
            rec.send_collected(&coll, kind, |rec, len| {
                waits += 1;
                rec.wait_for_space(len)
            })
            .unwrap();
            coll.clear();
        }
        rec.close().unwrap();
        assert!(waits > 0, "a ring of 64 KiB holds fewer than 16 steps of 8 KiB");
        assert_eq!(rec.stats().steps, 16);
    }
}
