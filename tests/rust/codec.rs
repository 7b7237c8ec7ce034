//! Property tests of the lockfile codec: whatever the bytes, decoding returns a lockfile or a
//! reason, never panics; what we encode decodes to the same lockfile; and JSON objects with
//! fields of any type are judged, never crash the decoder. (The cargo-fuzz target in fuzz/
//! drives the same decoder with coverage guidance.)

use blob_lock::LockFile;
use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::time::Duration;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const FIELDS: &[&str] = &[
    "writer_id",
    "written_at",
    "expire_s",
    "released_at",
    "first_written_at",
    "first_acquired_at",
    "hostname",
    "pid",
    "tid",
    "write_count",
    "writer_name",
    "token",
    "protocol",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bytes_decode_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        match LockFile::decode(&bytes) {
            Ok(lf) => {
                prop_assert!(!lf.writer_id.is_empty());
                prop_assert!(lf.expire_s > 0.0);
            }
            Err(e) => prop_assert!(!e.0.is_empty()),
        }
    }

    #[test]
    fn objects_with_any_field_types_never_panic(
        fields in prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..13)
    ) {
        let m: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let bytes = serde_json::to_vec(&Value::Object(m.clone())).unwrap();
        match LockFile::decode(&bytes) {
            Ok(lf) => {
                // Accepted only with the two fields the protocol needs, well formed.
                prop_assert_eq!(m.get("writer_id").and_then(Value::as_str), Some(&*lf.writer_id));
                prop_assert!(lf.expire_s > 0.0 && lf.expire_s.is_finite());
                let _ = lf.expire(); // in range for a Duration
            }
            Err(e) => prop_assert!(!e.0.is_empty()),
        }
    }

    #[test]
    fn encoded_lockfiles_round_trip(
        owner in "[a-zA-Z0-9._-]{1,40}",
        expire_ms in 100u64..10_000_000,
        token in any::<u64>(),
        secs in 0i64..4_000_000_000,
        renewals in 0usize..4,
        released in any::<bool>(),
    ) {
        let wall = Utc.timestamp_opt(secs, 123_000).unwrap();
        let mut lf = LockFile::acquired(&owner, Duration::from_millis(expire_ms), token, "cas", wall);
        for _ in 0..renewals {
            lf = lf.renewed(Some("remote"), wall);
        }
        if released {
            lf = lf.released(wall);
        }
        let back = LockFile::decode(&lf.encode()).unwrap();
        prop_assert_eq!(&back, &lf);
        prop_assert_eq!(back.is_released(), released);
        prop_assert_eq!(back.last_write_time(), Some(wall));
    }
}
