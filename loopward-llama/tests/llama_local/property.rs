//! A grammar-constrained call is complete and valid against its schema, or a recorded
//! error — for random schemas, prompts and budgets.

use super::*;
use proptest::prelude::*;
use serde_json::Value;
use std::sync::OnceLock;

const ITEMS: u32 = 3;

fn shared() -> &'static (LlamaService, tokio::runtime::Runtime) {
    static MODEL: OnceLock<(LlamaService, tokio::runtime::Runtime)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let model = load(
            LlamaConfig::new(model_path())
                .n_ctx(2048)
                .tool_choice(ToolChoice::CallThenAnswer)
                .argument_bounds(32, ITEMS),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (model, rt)
    })
}

fn property() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "string"})),
        (1u32..20).prop_map(|n| json!({"type": "string", "maxLength": n})),
        Just(json!({"type": "integer"})),
        Just(json!({"type": "number"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "string", "enum": ["red", "green", "blue"]})),
        Just(json!({"type": "array", "items": {"type": "string"}})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    proptest::collection::vec((property(), any::<bool>()), 1..4).prop_map(|props| {
        let names = ["alpha", "beta", "gamma"];
        let mut properties = serde_json::Map::new();
        let mut required = vec![];
        for (i, (p, req)) in props.into_iter().enumerate() {
            properties.insert(names[i].into(), p);
            if req {
                required.push(names[i]);
            }
        }
        json!({"type": "object", "properties": properties, "required": required})
    })
}

/// Checks `v` against the subset of JSON Schema that [`schema`] produces.
fn valid(v: &Value, s: &Value) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{v} against {s}: {why}"));
    match s["type"].as_str() {
        Some("object") => {
            let Value::Object(o) = v else {
                return fail("not an object");
            };
            for k in s["required"].as_array().unwrap() {
                if !o.contains_key(k.as_str().unwrap()) {
                    return fail("a required key is missing");
                }
            }
            for (k, x) in o {
                let Some(p) = s["properties"].get(k) else {
                    return fail("an undeclared key");
                };
                valid(x, p)?;
            }
            Ok(())
        }
        Some("string") => {
            let Value::String(t) = v else {
                return fail("not a string");
            };
            let max = s["maxLength"].as_u64().unwrap_or(32);
            if let Some(e) = s["enum"].as_array() {
                return if e.contains(v) {
                    Ok(())
                } else {
                    fail("not in the enum")
                };
            }
            if t.chars().count() as u64 > max {
                return fail("longer than its bound");
            }
            Ok(())
        }
        Some("integer") if v.is_i64() || v.is_u64() => Ok(()),
        Some("number") if v.is_number() => Ok(()),
        Some("boolean") if v.is_boolean() => Ok(()),
        Some("array") => {
            let Value::Array(a) = v else {
                return fail("not an array");
            };
            if a.len() as u32 > ITEMS {
                return fail("more items than its bound");
            }
            a.iter().try_for_each(|x| valid(x, &s["items"]))
        }
        _ => fail("wrong type"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]
    #[test]
    fn a_constrained_call_is_complete_and_valid_or_a_recorded_error(
        parameters in schema(),
        budget in 1u32..40,
        topic in prop::sample::select(vec!["Paris", "a red bicycle", "the number 7", "bees"]),
    ) {
        let (model, rt) = shared();
        let tool = ToolSpec {
            name: "record".into(),
            description: "Records facts about a topic.".into(),
            parameters: parameters.clone(),
        };
        let req = ask_person(format!("Record facts about {topic}."), vec![tool], budget);
        match rt.block_on(model.clone().oneshot(req)) {
            Ok(reply) => {
                prop_assert_eq!(reply.tool_calls.len(), 1, "{:?}", reply);
                prop_assert_eq!(&reply.tool_calls[0].name, "record");
                prop_assert!(reply.usage.output_tokens <= u64::from(budget));
                if let Err(why) = valid(&reply.tool_calls[0].arguments, &parameters) {
                    prop_assert!(false, "{}", why);
                }
            }
            Err(e) => {
                prop_assert!(
                    matches!(&e, ModelError::InvalidResponse(m) if m.contains(&format!("cut off at max_tokens ({budget})"))),
                    "{e:?}"
                );
            }
        }
    }
}
