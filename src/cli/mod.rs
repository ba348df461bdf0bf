//! The command line: one place that parses arguments and reports errors. Each command lives
//! in the module of its area and calls into the layers below.
//!
//! Errors are printed to stderr as one line, `git-xet: error: <reason>: <cause>...`, and the
//! process exits with status 1 (2 for usage errors, from clap). Nothing else writes to stdout
//! than a command's documented output: `git xet transfer` in particular owns stdout for the
//! git-lfs protocol.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod client_cmds;
mod core_cmds;
mod docs;
mod forward;
mod git_cmds;
mod man_install;
#[cfg(feature = "mount")]
mod mount_cmds;
mod progress;
mod store_cmds;

#[derive(Parser, Debug)]
#[command(
    name = "git-xet",
    bin_name = "git xet",
    version,
    about = "XET content-addressed storage for git: a git-lfs transfer agent and its server",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the content-defined chunks of a file: `<chunk-hash> <length>` per line.
    Chunk(core_cmds::ChunkArgs),
    /// Print the XET file hash of each file: `<hash>  <path>` (and sha256 with --sha256).
    Hash(core_cmds::HashArgs),
    /// Build, inspect and extract xorbs.
    #[command(subcommand)]
    Xorb(core_cmds::XorbCommand),
    /// Inspect shards.
    #[command(subcommand)]
    Shard(core_cmds::ShardCommand),
    /// Run the XET server (CAS API, git-lfs Batch API, git over HTTP), or manage its data
    /// (`git xet server --help` lists its options and subcommands).
    #[command(disable_help_flag = true)]
    Server(forward::Forwarded),
    /// Upload files to a CAS server; prints `<xet-file-hash>  <path>` per file.
    Upload(client_cmds::UploadArgs),
    /// Download a file (or a byte range of it) from a CAS server by its XET hash.
    Download(client_cmds::DownloadArgs),
    /// The git-lfs custom transfer agent (started by git-lfs, speaks JSON on stdin/stdout).
    Transfer(git_cmds::TransferArgs),
    /// git's long-running clean/smudge filter for LFS files (started by git; pkt-lines on
    /// stdin/stdout), a faster drop-in for `git lfs filter-process`.
    FilterProcess(git_cmds::TransferArgs),
    /// Configure git-lfs to use git-xet as its `xet` transfer agent.
    Install(git_cmds::InstallArgs),
    /// Remove exactly what `git xet install` added.
    Uninstall(git_cmds::InstallArgs),
    /// Move an existing LFS repository's objects to the remote's XET server (no history rewrite).
    Migrate(git_cmds::MigrateArgs),
    /// Show whether this repository uses git-xet, and the XET hashes of tracked files.
    Status(git_cmds::StatusArgs),
    /// Put whole LFS objects back into .git/lfs/objects (from the chunk store, else the
    /// server): for git-lfs commands that read it directly, and before uninstalling.
    Materialize(store_cmds::MaterializeArgs),
    /// Delete from the per-user chunk store what no registered clone references.
    Prune(store_cmds::PruneArgs),
    /// Demonstrate the whole workflow against a temporary local server.
    Quickstart(git_cmds::QuickstartArgs),
    /// The pre-receive check, built in: a bare repository's pre-receive hook runs it
    /// (`git xet server` installs that hook in the repositories it hosts; other git servers
    /// use the pre-receive hook shipped with git-xet).
    #[command(disable_help_flag = true)]
    PreReceive(forward::Forwarded),
    /// The forced command of an ssh key (authorized_keys `command="git xet shell ..."`):
    /// serves git-upload-pack, git-receive-pack, git-lfs-authenticate and git-lfs-transfer
    /// on the repositories its --repo arguments allow. See `git xet server user add`.
    #[command(disable_help_flag = true)]
    Shell(forward::Forwarded),
    /// Mount a revision of this repository on DIR as a read-only file system: LFS files are
    /// read lazily, in ranges, through XET (FUSE; `git xet unmount DIR` to unmount).
    #[cfg(feature = "mount")]
    Mount(mount_cmds::MountArgs),
    /// Unmount what `git xet mount` mounted on DIR.
    #[cfg(feature = "mount")]
    Unmount(mount_cmds::UnmountArgs),
    /// Started by `git xet mount`: unmounts DIR when the mount process dies.
    #[cfg(feature = "mount")]
    #[command(hide = true)]
    MountWatcher(mount_cmds::MountWatcherArgs),
    /// Write the man pages and shell completions into DIR (install.sh runs it).
    #[command(hide = true)]
    GenerateDocs(docs::DocsArgs),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    if let Some(code) = docs::help_as_man_page() {
        return code;
    }
    // Transfers allocate and free chunk-sized buffers all the time: reuse their pages.
    git_xet_io::platform::heap::keep_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Chunk(a) => core_cmds::chunk(a),
        Command::Hash(a) => core_cmds::hash(a),
        Command::Xorb(c) => core_cmds::xorb(c),
        Command::Shard(c) => core_cmds::shard(c),
        Command::Server(a) => forward::to_server("server", a),
        Command::Upload(a) => client_cmds::upload(a),
        Command::Download(a) => client_cmds::download(a),
        Command::Transfer(a) => git_cmds::transfer(a),
        Command::FilterProcess(_) => git_cmds::filter_process(),
        Command::Install(a) => git_cmds::install(a),
        Command::Uninstall(a) => git_cmds::uninstall(a),
        Command::Migrate(a) => git_cmds::migrate(a),
        Command::Status(a) => git_cmds::status(a),
        Command::Materialize(a) => store_cmds::materialize(a),
        Command::Prune(a) => store_cmds::prune(a),
        Command::Quickstart(a) => git_cmds::quickstart(a),
        Command::PreReceive(a) => forward::to_server("pre-receive", a),
        Command::Shell(a) => forward::to_server("shell", a),
        #[cfg(feature = "mount")]
        Command::Mount(a) => mount_cmds::mount(a),
        #[cfg(feature = "mount")]
        Command::Unmount(a) => mount_cmds::unmount(a),
        #[cfg(feature = "mount")]
        Command::MountWatcher(a) => mount_cmds::mount_watcher(a),
        Command::GenerateDocs(a) => docs::generate(a),
    };
    // The one runtime of the process, if a command built one (git_xet_io::runtime): a few
    // seconds for blocking work to end, not forever.
    git_xet_io::runtime::shutdown(std::time::Duration::from_secs(5));
    match result {
        Ok(code) => code,
        Err(err) => {
            crate::common::logging::report_error(err.as_ref());
            ExitCode::FAILURE
        }
    }
}
