//! Upkeep of a git-xet deployment: the admin commands that run beside the servers, on the
//! same object store and index, written against the `ObjectStore` and `Index` traits so that
//! every backend gets them. None of them serves anything.
//!
//! | module    | command                                                                  |
//! |-----------|--------------------------------------------------------------------------|
//! | `gc`      | `gc`: frees what no repository reaches, safe while uploads run; `UpkeepError` |
//! | `check`   | `check`: every registered file can be rebuilt; reports, repairs nothing  |
//! | `rebuild` | `index rebuild`: the index again from the stored shards and repositories |
//! | `migrate` | `storage migrate`: every object copied to another store, verified        |
//! | `backup`  | `backup`, `backup verify`, `restore`: a whole deployment, incremental    |

pub mod backup;
pub mod check;
pub mod gc;
pub mod migrate;
pub mod rebuild;
