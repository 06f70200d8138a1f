//! Canonical JSON and its digest: the identity of a tool call's arguments, so "the same call"
//! means the same tool and the same arguments whatever the key order.

use sha2::{Digest, Sha256};

/// Serialises `value` with object keys sorted at every level and no whitespace.
///
/// ```
/// use loopward_runner::layers::canonical_json;
/// let a = serde_json::json!({"b": 1, "a": {"d": [1, 2], "c": null}});
/// assert_eq!(canonical_json(&a), r#"{"a":{"c":null,"d":[1,2]},"b":1}"#);
/// ```
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The SHA-256 of `tool` and the canonical JSON of `arguments`, in hex.
///
/// ```
/// use loopward_runner::layers::call_digest;
/// use serde_json::json;
/// assert_eq!(call_digest("write_file", &json!({"a": 1, "b": 2})),
///            call_digest("write_file", &json!({"b": 2, "a": 1})));
/// assert_ne!(call_digest("write_file", &json!({"a": 1})), call_digest("edit_file", &json!({"a": 1})));
/// ```
pub fn call_digest(tool: &str, arguments: &serde_json::Value) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0u8]);
    h.update(canonical_json(arguments).as_bytes());
    hex::encode(h.finalize())
}
