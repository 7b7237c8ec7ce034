//! The options a user gives a lock: the one definition of each (name, type, default, doc),
//! from which the bindings parse Python's keyword arguments and make their typing, and the
//! CLI makes its flags. Bounds that depend on other options are checked where they are used
//! ([`crate::timing::Timing::new`]).

use super::LossHook;
use crate::errors::{Error, Result};
use crate::lockfile::{labels, Labels};
use crate::protocol::Protocol;
use crate::timing::{Timing, TimingSpec};

/// What a user gave for an option, before the option checks it.
#[derive(Debug, Clone)]
pub enum Given {
    /// Nothing (Python's None).
    None,
    /// A boolean.
    Flag(bool),
    /// Seconds.
    Seconds(f64),
    /// A word.
    Text(String),
    /// Key-value pairs, in the order given.
    Pairs(Vec<(String, String)>),
    /// A loss callback, made into a hook by the bindings.
    Hook(LossHook),
    /// A value the bindings keep and resolve themselves (storage options, a credential
    /// provider): the core meets it as [`crate::store::Access`].
    External,
}

/// What an option takes, as the bindings convert and type it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Positive seconds (a number or a timedelta).
    Seconds,
    /// Seconds, or None.
    SecondsOrNone,
    /// `"auto"`, `"cas"` or `"lww"`.
    Protocol,
    /// True or False.
    Flag,
    /// A mapping of strings to strings, checked by [`crate::lockfile::labels`].
    Labels,
    /// object_store configuration keys to strings.
    StorageOptions,
    /// A credential provider.
    Credentials,
    /// A callable called once with the loss.
    Callback,
}

impl Kind {
    /// The name the bindings give the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Seconds => "seconds",
            Kind::SecondsOrNone => "seconds_or_none",
            Kind::Protocol => "protocol",
            Kind::Flag => "flag",
            Kind::Labels => "labels",
            Kind::StorageOptions => "storage_options",
            Kind::Credentials => "credentials",
            Kind::Callback => "callback",
        }
    }
}

/// One option as the bindings show it.
#[derive(Debug, Clone)]
pub struct Field {
    /// The keyword argument's name.
    pub name: &'static str,
    /// What it takes.
    pub kind: Kind,
    /// Its default.
    pub default: Given,
    /// Its doc comment, one string per line.
    pub doc: &'static [&'static str],
}

/// A marker for an option kept by the bindings ([`Given::External`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct External;

/// How a field's type takes a [`Given`] value, and shows its default.
trait Setting: Sized {
    fn take(name: &str, given: Given) -> Result<Self>;
    fn shown(&self) -> Given;
}

fn wrong(name: &str, what: &str, given: &Given) -> Error {
    Error::InvalidArgument(format!("{name} must be {what}, got {given:?}"))
}

impl Setting for f64 {
    fn take(name: &str, given: Given) -> Result<Self> {
        match given {
            Given::Seconds(s) => Ok(s),
            other => Err(wrong(name, "seconds", &other)),
        }
    }
    fn shown(&self) -> Given {
        Given::Seconds(*self)
    }
}

impl Setting for Option<f64> {
    fn take(name: &str, given: Given) -> Result<Self> {
        match given {
            Given::None => Ok(None),
            other => f64::take(name, other).map(Some),
        }
    }
    fn shown(&self) -> Given {
        self.map_or(Given::None, Given::Seconds)
    }
}

impl Setting for bool {
    fn take(name: &str, given: Given) -> Result<Self> {
        match given {
            Given::Flag(b) => Ok(b),
            other => Err(wrong(name, "True or False", &other)),
        }
    }
    fn shown(&self) -> Given {
        Given::Flag(*self)
    }
}

/// `None` is auto: the store decides.
impl Setting for Option<Protocol> {
    fn take(name: &str, given: Given) -> Result<Self> {
        match given {
            Given::Text(t) if t == "auto" => Ok(None),
            Given::Text(t) if t == "cas" => Ok(Some(Protocol::Cas)),
            Given::Text(t) if t == "lww" => Ok(Some(Protocol::Lww)),
            Given::Text(t) => Err(Error::InvalidArgument(format!(
                "{name} must be \"auto\", \"cas\" or \"lww\", got {t:?}"
            ))),
            other => Err(wrong(name, "\"auto\", \"cas\" or \"lww\"", &other)),
        }
    }
    fn shown(&self) -> Given {
        Given::Text(self.map_or("auto", Protocol::as_str).to_string())
    }
}

impl Setting for Option<Labels> {
    fn take(name: &str, given: Given) -> Result<Self> {
        match given {
            Given::None => Ok(None),
            Given::Pairs(pairs) => labels::check(pairs).map_err(Error::InvalidArgument),
            other => Err(wrong(name, "a mapping of strings", &other)),
        }
    }
    fn shown(&self) -> Given {
        match self {
            None => Given::None,
            Some(l) => Given::Pairs(l.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        }
    }
}

impl Setting for Option<LossHook> {
    fn take(name: &str, given: Given) -> Result<Self> {
        match given {
            Given::None => Ok(None),
            Given::Hook(h) => Ok(Some(h)),
            other => Err(wrong(name, "a callable", &other)),
        }
    }
    fn shown(&self) -> Given {
        if self.is_some() {
            Given::External
        } else {
            Given::None
        }
    }
}

impl Setting for External {
    fn take(_: &str, _: Given) -> Result<Self> {
        Ok(External)
    }
    fn shown(&self) -> Given {
        Given::None
    }
}

/// Declares the options: each one's doc, name, type, default and kind, once.
macro_rules! settings {
    ($( $(#[doc = $doc:literal])+ $name:ident: $ty:ty = $default:expr, $kind:ident; )+) => {
        /// The options a user gives a lock, each with its default. Build from a user's
        /// values with [`Settings::set`]; [`super::LockOptions::from_settings`] checks them
        /// together and makes the lock's configuration.
        #[derive(Debug, Clone)]
        pub struct Settings {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings { $( $name: $default, )+ }
            }
        }

        impl Settings {
            /// Every option, in the order of its definition.
            pub fn fields() -> &'static [Field] {
                static FIELDS: std::sync::LazyLock<Vec<Field>> = std::sync::LazyLock::new(|| {
                    let d = Settings::default();
                    vec![$( Field {
                        name: stringify!($name),
                        kind: Kind::$kind,
                        default: Setting::shown(&d.$name),
                        doc: &[$($doc),+],
                    }, )+]
                });
                &FIELDS
            }

            /// Sets option `name` to what a user gave; an unknown name is refused with the
            /// nearest known one.
            pub fn set(&mut self, name: &str, given: Given) -> Result<()> {
                match name {
                    $( stringify!($name) => self.$name = Setting::take(name, given)?, )+
                    other => return Err(unknown(other)),
                }
                Ok(())
            }
        }
    };
}

settings! {
    /// Seconds after its last write at which a lock nobody renews expires (0.5 s to 7 days).
    expire: f64 = 30.0, Seconds;
    /// Seconds between renewals; default `expire / 3`, below `expire / 2`.
    heartbeat: Option<f64> = None, SecondsOrNone;
    /// Seconds a `with` block or `acquire` waits for the lock before `LockTimeout`; None
    /// waits for ever.
    timeout: Option<f64> = None, SecondsOrNone;
    /// `"cas"` (conditional writes: mutual exclusion), `"lww"` (last writer wins after a
    /// settle wait: best effort, for stores without conditional writes) or `"auto"` (`cas`
    /// where the store honours conditional writes, else `lww` with a warning).
    protocol: Option<Protocol> = None, Protocol;
    /// object_store configuration keys (`aws_endpoint`, `azure_storage_account_name`, ...)
    /// on top of the environment, and `blob_lock_conditional_writes="trust"`.
    storage_options: External = External, StorageOptions;
    /// Where credentials come from (a callable returning them, a boto3 session, an
    /// azure-identity credential, google-auth credentials); None: `set_credentials`, else
    /// the cloud's own chain.
    credential_provider: External = External, Credentials;
    /// lww only: seconds a writer waits after writing before reading back; default
    /// `expire / 20` within 0.05 to 0.5 s.
    settle: Option<f64> = None, SecondsOrNone;
    /// How far machines' wall clocks may disagree, in seconds: a lock last written more than
    /// `expire + clock_skew` ago is taken at once; None switches that off.
    clock_skew: Option<f64> = Some(60.0), SecondsOrNone;
    /// Called once, on one of blob-lock's callback threads, with the `LockLost` error when a
    /// held lock is lost.
    on_lost: Option<LossHook> = None, Callback;
    /// Whether leaving a `with` block after a loss raises `LockLost`.
    raise_on_lost: bool = true, Flag;
    /// Written into the lockfile by every acquisition: who holds the lock and why (at most
    /// 32; keys of 1 to 63 ASCII letters, digits, `_-.`; values up to 1,024 characters).
    labels: Option<Labels> = None, Labels;
}

impl Settings {
    /// The defaults, with `expire` seconds.
    pub fn with_expire(expire: f64) -> Settings {
        Settings {
            expire,
            ..Settings::default()
        }
    }

    /// The timing these settings give, checked: the one place where options become timing.
    pub fn timing(&self) -> Result<Timing> {
        Timing::new(TimingSpec {
            expire: self.expire,
            heartbeat: self.heartbeat,
            settle: self.settle,
            clock_skew: self.clock_skew,
        })
    }
}

impl Settings {
    /// The option named `name`; for an unknown name, a message naming the nearest one.
    pub fn field(name: &str) -> std::result::Result<&'static Field, String> {
        Settings::fields()
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| unknown(name).to_string())
    }
}

fn unknown(name: &str) -> Error {
    let names: Vec<&str> = Settings::fields().iter().map(|f| f.name).collect();
    let hint = match crate::nearest::nearest(name, names.iter().copied()) {
        Some(n) => format!("did you mean {n:?}? "),
        None => String::new(),
    };
    Error::InvalidArgument(format!(
        "unknown option {name:?}: {hint}the options are {}",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let d = Settings::default();
        assert_eq!(d.expire, 30.0);
        assert_eq!(d.clock_skew, Some(60.0));
        assert!(d.protocol.is_none() && d.raise_on_lost);
        let names: Vec<_> = Settings::fields().iter().map(|f| f.name).collect();
        assert_eq!(names[0], "expire");
        assert!(Settings::fields().iter().all(|f| !f.doc.is_empty()));
    }

    #[test]
    fn set_checks_the_kind_and_names_the_nearest_option() {
        let mut s = Settings::default();
        s.set("expire", Given::Seconds(5.0)).unwrap();
        s.set("protocol", Given::Text("lww".into())).unwrap();
        assert_eq!((s.expire, s.protocol), (5.0, Some(Protocol::Lww)));
        let e = s
            .set("expires", Given::Seconds(5.0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean \"expire\""), "{e}");
        let e = s.set("protocol", Given::Text("fast".into())).unwrap_err();
        assert!(e.to_string().contains("\"fast\""), "{e}");
        assert!(s.set("raise_on_lost", Given::Seconds(1.0)).is_err());
    }
}
