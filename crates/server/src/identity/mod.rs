//! Who a credential's holder is and what they may do, beyond the server's own tokens: the
//! rule language every credential speaks (`rules`), OpenID Connect tokens (`oidc`) and the
//! policy file that maps their holders to rules (`policy`).

pub mod oidc;
pub mod policy;
pub mod rules;

pub use oidc::{Oidc, OidcSettings};
