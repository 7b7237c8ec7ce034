//! The lockfile codec's own tests.

use super::*;
use serde_json::Value;

#[test]
fn round_trip() {
    let lf = LockFile::acquired("abc", Duration::from_secs(30), 7, "cas", Utc::now());
    let back = LockFile::decode(&lf.encode()).unwrap();
    assert_eq!(lf, back);
    assert!(!back.is_released());
    let rel = back.released(Utc::now());
    assert!(rel.is_released());
    assert_eq!(rel.token, 7);
    assert_eq!(&*rel.writer_id, "abc");
}

#[test]
fn launch_grace_round_trips_lengthens_the_lifetime_and_is_not_carried_on() {
    let mut lf = LockFile::acquired("abc", Duration::from_secs(30), 7, "cas", Utc::now());
    assert_eq!(lf.lifetime(), Duration::from_secs(30));
    lf.grace_s = Some(600.0);
    let back = LockFile::decode(&lf.encode()).unwrap();
    assert_eq!(back.grace_s, Some(600.0));
    assert_eq!(back.lifetime(), Duration::from_secs(600));
    assert!(back.grace_until().unwrap() > back.last_write_time().unwrap());
    assert_eq!(back.renewed(Some("remote"), Utc::now()).grace_s, None);
    assert_eq!(back.released(Utc::now()).grace_s, None);
    lf.grace_s = Some(5.0); // shorter than expire_s: no effect
    assert_eq!(lf.lifetime(), Duration::from_secs(30));
}

#[test]
fn rejects_what_is_not_a_lockfile() {
    for (bytes, why) in [
        (&b"not json"[..], "not JSON"),
        (b"[1,2]", "not a JSON object"),
        (b"{}", "no `writer_id`"),
        (b"{\"writer_id\": 3, \"expire_s\": 1}", "not a string"),
        (b"{\"writer_id\": \"a\"}", "no `expire_s`"),
        (
            b"{\"writer_id\": \"a\", \"expire_s\": -1}",
            "not a positive",
        ),
        (
            b"{\"writer_id\": \"a\", \"expire_s\": 1e300}",
            "not a positive",
        ),
        (
            b"{\"writer_id\": \"a\", \"expire_s\": 1, \"token\": -2}",
            "token",
        ),
        (
            b"{\"writer_id\": \"a\", \"expire_s\": 1, \"grace_s\": -5}",
            "grace_s",
        ),
        (
            b"{\"writer_id\": \"a\", \"expire_s\": 1, \"grace_s\": \"soon\"}",
            "grace_s",
        ),
    ] {
        let err = LockFile::decode(bytes).unwrap_err();
        assert!(err.0.contains(why), "{err} should mention {why}");
    }
    let huge = vec![b' '; MAX_LOCKFILE_BYTES + 1];
    assert!(LockFile::decode(&huge).unwrap_err().0.contains("larger"));
}

#[test]
fn reads_mops_style_fields_leniently() {
    let body = br#"{"writer_id": "w", "written_at": "2026-01-02T03:04:05.123456+00:00",
        "expire_s": 30, "released_at": "", "pid": 123, "tid": 5, "hostname": "h",
        "first_written_at": "", "first_acquired_at": "", "write_count": 2}"#;
    let lf = LockFile::decode(body).unwrap();
    assert_eq!(&*lf.pid, "123");
    assert_eq!(lf.token, 0);
    assert_eq!(lf.expire(), Duration::from_secs(30));
    assert!(lf.last_write_time().is_some());
}

#[test]
fn labels_round_trip_and_are_kept_through_renewal_and_release() {
    let mut lf = LockFile::acquired("abc", Duration::from_secs(30), 7, "cas", Utc::now());
    lf.labels = labels::check([("run".to_string(), "r-1".to_string())]).unwrap();
    let back = LockFile::decode(&lf.encode()).unwrap();
    assert_eq!(back, lf);
    let renewed = back.renewed(Some("remote"), Utc::now());
    assert_eq!(renewed.labels, lf.labels);
    assert_eq!(renewed.released(Utc::now()).labels, lf.labels);
    assert_eq!(labels::describe(renewed.labels.as_ref()), "run=r-1");
}

#[test]
fn labels_written_by_another_hand_are_read_leniently() {
    let body = br#"{"writer_id": "a", "expire_s": 30, "labels": {"run": "x", "n": 3, "o": {}}}"#;
    let lf = LockFile::decode(body).unwrap();
    assert_eq!(labels::describe(lf.labels.as_ref()), "run=x");
    let body = br#"{"writer_id": "a", "expire_s": 30, "labels": "run=x"}"#;
    assert_eq!(LockFile::decode(body).unwrap().labels, None);
}

#[test]
fn labels_out_of_bounds_are_refused_with_the_reason() {
    let one = |k: &str, v: &str| labels::check([(k.to_string(), v.to_string())]);
    assert_eq!(one("run", "x").unwrap().unwrap().len(), 1);
    assert!(labels::check(Vec::new()).unwrap().is_none());
    for (key, value, why) in [
        ("", "x", "1 to 63"),
        (&"k".repeat(64)[..], "x", "1 to 63"),
        ("-run", "x", "starting with a letter or digit"),
        ("run id", "x", "ASCII letters"),
        ("rün", "x", "ASCII letters"),
        ("run", "a\nb", "control character"),
        ("run", &"v".repeat(1025)[..], "more than 1024"),
    ] {
        let err = one(key, value).unwrap_err();
        assert!(err.contains(why), "{key:?}={value:?}: {err}");
    }
    let many = (0..33).map(|i| (format!("k{i}"), "v".to_string()));
    assert!(labels::check(many).unwrap_err().contains("more than 32"));
    let large = (0..8).map(|i| (format!("k{i}"), "v".repeat(1000)));
    assert!(labels::check(large).unwrap_err().contains("more than 4096"));
    // The largest labels allowed keep the lockfile well within what readers accept.
    let largest = (0..4).map(|i| (format!("k{i}"), "v".repeat(1000)));
    let mut lf = LockFile::acquired("abc", Duration::from_secs(30), 7, "cas", Utc::now());
    lf.labels = labels::check(largest).unwrap();
    assert!(LockFile::decode(&lf.encode()).is_ok());
}

#[test]
fn encodes_every_field_in_the_form_a_json_map_writes() {
    // Every optional field set, strings that need escaping, a negative thread id: the bytes
    // must be what serde_json writes for the same object (keys sorted, compact), so that
    // lockfiles read back the same and do not change form between versions.
    let mut lf = LockFile::acquired(
        "own\"er\n",
        Duration::from_millis(2500),
        9,
        "lww",
        Utc::now(),
    );
    lf.tid = -42;
    lf.writer_name = Some("remote".into());
    lf.broken_by = Some("ana@host pid 7 é".into());
    lf.grace_s = Some(600.25);
    lf.labels = Some(std::sync::Arc::new(
        [
            ("b".to_string(), "2".to_string()),
            ("a".into(), "\u{1}".into()),
        ]
        .into(),
    ));
    let bytes = lf.encode();
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        String::from_utf8(serde_json::to_vec(&value).unwrap()).unwrap(),
        String::from_utf8(bytes.clone()).unwrap()
    );
    assert_eq!(LockFile::decode(&bytes).unwrap(), lf);
    assert_eq!(value.as_object().unwrap().len(), 16, "every field written");

    // And none of the optional ones when unset.
    let plain =
        LockFile::acquired("o", Duration::from_secs(30), 1, "cas", Utc::now()).released(Utc::now());
    let bytes = plain.encode();
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(serde_json::to_vec(&value).unwrap(), bytes);
    assert_eq!(LockFile::decode(&bytes).unwrap(), plain);
}
