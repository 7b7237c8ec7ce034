//! The lockfile codec's own tests.

use super::*;

#[test]
fn round_trip() {
    let lf = LockFile::acquired("abc", Duration::from_secs(30), 7, "cas", Utc::now());
    let back = LockFile::decode(&lf.encode()).unwrap();
    assert_eq!(lf, back);
    assert!(!back.is_released());
    let rel = back.released(Utc::now());
    assert!(rel.is_released());
    assert_eq!(rel.token, 7);
    assert_eq!(rel.writer_id, "abc");
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
    assert_eq!(lf.pid, "123");
    assert_eq!(lf.token, 0);
    assert_eq!(lf.expire(), Duration::from_secs(30));
    assert!(lf.last_write_time().is_some());
}
