//! What both programs share and no library needs: logging set-up, progress bars on a terminal,
//! and man pages and completions from their clap definitions. Each program includes this
//! module (`git-xet` as `crate::common`, `git-xet-server` by path), so that the libraries
//! below carry no clap, indicatif or log formatting.

// Each program uses a part of it.
#![allow(dead_code)]

pub mod cli_docs;
pub mod json_log;
pub mod logging;
pub mod terminal;
