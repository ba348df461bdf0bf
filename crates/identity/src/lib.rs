//! Who may do what on a git-xet server: the server's secret and the keys derived from it,
//! its access tokens and their rules, signed fetch and upload URLs, the revocation cache,
//! OpenID Connect tokens and the policy that maps their holders to rules.
//!
//! Pure checks over values the server hands in (headers, the clock, the index for
//! revocations): no routes, no HTTP server. Every refusal is an [`AuthError`], decided by
//! variant.
//!
//! | module       | job                                                                  |
//! |--------------|----------------------------------------------------------------------|
//! | `keys`       | the server secret on disk; token, URL and dedup keys derived from it |
//! | `auth`       | issuing and verifying tokens; authorizing a request for a repository |
//! | `rules`      | the rule language every credential speaks (`org/*:write`)            |
//! | `signing`    | signed xorb fetch URLs and basic upload URLs                          |
//! | `revocation` | revoked token ids, as the index says, remembered for a few seconds   |
//! | `oidc`       | JWTs of an identity provider, verified against its JWKS               |
//! | `policy`     | the policy file: which OIDC holders get which rules                  |

pub mod auth;
mod error;
pub mod keys;
pub mod oidc;
pub mod policy;
pub mod revocation;
pub mod rules;
pub mod signing;

pub use error::AuthError;
pub use oidc::{Oidc, OidcSettings, OidcSetupError};
