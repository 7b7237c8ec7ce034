//! Any bytes into the lockfile decoder: a lockfile or a reason, never a panic; and whatever
//! decodes, re-encodes and decodes to the same value.
#![no_main]

use blob_lock::LockFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(lf) = LockFile::decode(data) {
        assert!(!lf.writer_id.is_empty() && lf.expire_s > 0.0);
        let _ = lf.expire();
        let again = LockFile::decode(&lf.encode()).expect("our own encoding decodes");
        assert_eq!(again, lf);
    }
});
