//! HTTP transport for the whole client side: git's HTTP settings as plain values
//! ([`HttpSettings`], matched per URL by git's rules), the one factory every HTTP client
//! comes from ([`HttpFactory`]: the system's certificate store plus configured CAs, client
//! certificates, proxies, extra headers), authentication with a credential store
//! ([`Authenticator`]) and failures by kind ([`TransportError`]).

mod auth;
mod error;
mod factory;
mod settings;
pub mod urlmatch;

pub use auth::{Access, Authenticator, Credential, CredentialStore, HeaderSource};
pub use error::{shown_url, TransportError, CREDENTIALS_HINT};
pub use factory::HttpFactory;
pub use settings::{HttpEnv, HttpKey, HttpSettings, Resolved};
