//! What stands in for the cloud stores' clients in a build without the `cloud` feature
//! (the simulation's and the model check's, which bring their own store): the same names,
//! with nothing that can be made. Opening an `s3://`, `az://` or `gs://` URI says which
//! feature is missing.

pub(crate) mod cloud {
    use crate::errors::{Error, Result};
    use crate::store::storage_options::Options;
    use crate::store::uri::Cloud;

    /// Never made: no cloud client can be built.
    pub(crate) struct Built {
        pub(crate) store: std::sync::Arc<dyn object_store::ObjectStore>,
        pub(crate) name: String,
        pub(crate) signing: super::signing::Signing,
        pub(crate) deleter: super::conditional_delete::Deleter,
    }

    pub(crate) fn build(
        cloud: Cloud,
        scheme: &str,
        authority: &str,
        _options: &Options,
    ) -> Result<Built> {
        Err(Error::InvalidArgument(format!(
            "{scheme}://{authority}: this build of blob-lock has no {} client; build it with the `cloud` feature (on by default)",
            cloud.name()
        )))
    }
}

pub(crate) mod conditional_delete {
    use crate::store::Version;
    use object_store::path::Path;
    use std::time::Duration;

    /// Never made: only cloud stores have one.
    #[derive(Debug)]
    pub(crate) enum Deleter {}

    /// Matched by the gate, never answered: no store here has a deleter.
    #[allow(dead_code)]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Deleted {
        Yes,
        Changed,
    }

    impl Deleter {
        pub(crate) async fn delete_if(
            &self,
            _path: &Path,
            _expected: &Version,
            _valid_for: Duration,
        ) -> object_store::Result<Deleted> {
            match *self {}
        }
    }
}

pub(crate) mod credentials {
    use crate::store::uri::Cloud;

    /// Credentials for a cloud store; none can be made without the `cloud` feature.
    #[derive(Clone, Debug)]
    pub enum Credentials {}

    impl Credentials {
        /// Where the credentials come from.
        pub fn source(&self) -> &str {
            match *self {}
        }

        /// Which cloud they are for.
        pub fn cloud(&self) -> Cloud {
            match *self {}
        }

        pub(crate) fn id(&self) -> usize {
            match *self {}
        }
    }

    pub(crate) fn failure_in(_e: &object_store::Error) -> Option<String> {
        None
    }
}

pub(crate) mod signing {
    /// How a client's requests are signed: never, without a cloud client.
    #[derive(Clone, Debug)]
    pub(crate) enum Signing {
        Unsigned,
    }

    impl Signing {
        pub(crate) fn source(&self) -> String {
            "nowhere: requests are not signed".to_string()
        }

        pub(crate) async fn ready(&self) -> Result<(), String> {
            Ok(())
        }
    }
}

pub(crate) mod transport {
    //! Without an HTTP client there is no transport to fail.

    pub(crate) fn failed(_e: &object_store::Error) -> bool {
        false
    }

    pub(crate) fn dropped_connection(_e: &object_store::Error) -> bool {
        false
    }

    pub(crate) fn resendable(_e: &object_store::Error) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{open, Access};
    use crate::timing::{Timing, TimingSpec};

    #[test]
    fn a_cloud_uri_names_the_missing_feature() {
        let timing = Timing::new(TimingSpec {
            expire: 30.0,
            heartbeat: None,
            settle: None,
            clock_skew: None,
        })
        .unwrap();
        for uri in [
            "s3://bucket/lock",
            "az://container/lock",
            "gs://bucket/lock",
        ] {
            let e = open(uri, &Access::default(), &timing).unwrap_err();
            assert!(e.to_string().contains("the `cloud` feature"), "{uri}: {e}");
        }
    }
}
