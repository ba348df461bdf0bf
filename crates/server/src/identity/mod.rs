//! Who a credential's holder is and what they may do, beyond the server's own tokens: the
//! rule language every credential speaks (`rules`).

pub mod rules;
