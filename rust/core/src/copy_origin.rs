//! What a converted or recovered copy says of the recording it was copied from. The copy is
//! written by replaying episodes one at a time (autoreset "disabled", no timelog), so its own
//! Meta record no longer says how the data was recorded: the original's autoreset mode, sub-envs
//! and the env steps its recorder was asked to take go into the copy's `user` metadata, under
//! `converted_from` or `recovered_from`, with where and when it was copied. A copy of a copy keeps
//! the first recording's description.

use std::path::Path;

use serde_json::{json, Value};

/// The `user` key of a copy's origin: `converted_from` or `recovered_from`.
pub fn key(how: &str) -> String {
    match how {
        "recover" => "recovered_from".into(),
        _ => "converted_from".into(),
    }
}

/// The origin of a copy of the recording `id` of dataset `path`, whose Meta JSON is `meta`;
/// `asked`: the env steps its recorder was asked to take (its timelog's steps times its sub-envs),
/// if known; `how`: "convert" or "recover"; `at_ns`: now, Unix ns.
pub fn origin(path: &Path, id: &[u8; 16], meta: &Value, asked: Option<u64>, how: &str, at_ns: u64) -> Value {
    let user = meta.get("user");
    // A copy of a copy: the first recording's description.
    let earlier = user.and_then(|u| u.get("converted_from").or_else(|| u.get("recovered_from")));
    let from_earlier = |field: &str| earlier.and_then(|e| e.get(field)).filter(|v| !v.is_null()).cloned();
    json!({
        "how": how,
        "path": path.display().to_string(),
        "at_ns": at_ns,
        "recording_id": id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "autoreset_mode": from_earlier("autoreset_mode").or_else(|| meta.get("autoreset_mode").cloned()),
        "num_envs": from_earlier("num_envs").or_else(|| meta.get("num_envs").cloned()),
        "env_steps_asked": from_earlier("env_steps_asked").or_else(|| asked.map(Value::from)),
        "trajcore_version": from_earlier("trajcore_version").or_else(|| meta.get("trajcore_version").cloned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_describes_the_first_recording() {
        let recorded = json!({"autoreset_mode": "next_step", "num_envs": 16, "trajcore_version": "0.1.0", "user": {}});
        let first = origin(Path::new("runs/cp16"), &[1; 16], &recorded, Some(1_600_000), "convert", 5);
        assert_eq!(first["how"], "convert");
        assert_eq!(first["autoreset_mode"], "next_step");
        assert_eq!(first["env_steps_asked"], 1_600_000);
        assert_eq!(first["num_envs"], 16);
        assert_eq!(first["at_ns"], 5);
        assert_eq!(first["recording_id"], "01".repeat(16));
        // The copy's own Meta says "disabled" and has no timelog; a copy of it keeps the above.
        let copied = json!({"autoreset_mode": "disabled", "num_envs": 16, "user": {"converted_from": first}});
        let second = origin(Path::new("raw"), &[2; 16], &copied, None, "recover", 9);
        assert_eq!((second["how"].as_str(), second["path"].as_str()), (Some("recover"), Some("raw")));
        assert_eq!(second["autoreset_mode"], "next_step");
        assert_eq!(second["env_steps_asked"], 1_600_000);
        assert_eq!((key("convert"), key("recover")), ("converted_from".to_string(), "recovered_from".to_string()));
    }
}
