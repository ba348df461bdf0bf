//! The pages' data: plain values the server fills in from git and its index, and the
//! templates (pages/) render. Text here is as users wrote it (paths, messages, names):
//! the templates escape it, so nothing here is HTML except [`SafeHtml`].

pub use crate::costs::Cost;
pub use crate::markdown::SafeHtml;
pub use crate::safetensors::Header as SafetensorsHeader;

/// Who is looking: shown in the header (sign in, or sign out).
#[derive(Debug, Clone, Default)]
pub struct Viewer {
    /// The session's user name when signed in with the form.
    pub session_user: Option<String>,
    /// The path of the page (the sign-in form returns here).
    pub here: String,
}

/// Files registered and the xorbs holding them (the server's index counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub files: u64,
    pub logical_bytes: u64,
    pub xorbs: u64,
    pub stored_bytes: u64,
}

/// A repository as every page of it names it.
#[derive(Debug, Clone)]
pub struct RepoInfo {
    /// `org/name` or `datasets/org/name`.
    pub name: String,
    pub is_dataset: bool,
    pub private: bool,
}

/// Which tab of a repository a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Files,
    Commits,
    Status,
}

/// What every page of a repository shows at its top.
#[derive(Debug, Clone)]
pub struct RepoChrome {
    pub repo: RepoInfo,
    /// The revision as in the URL (a branch, tag or commit id).
    pub rev: String,
    /// The default branch (HEAD's), if the repository has a commit.
    pub default_branch: Option<String>,
    pub branches: Vec<String>,
    pub tags: Vec<String>,
    pub tab: Tab,
}

/// What a tree entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    /// A plain git blob of `size` bytes.
    File {
        size: u64,
    },
    /// An LFS pointer to `size` bytes; `xet` when this server holds it in XET.
    Lfs {
        size: u64,
        xet: bool,
    },
    Submodule,
    /// A symlink to `target` (shown, never followed).
    Symlink,
}

#[derive(Debug, Clone)]
pub struct TreeEntry {
    /// The last segment.
    pub name: String,
    /// From the repository's root.
    pub path: String,
    pub kind: EntryKind,
}

/// How to get the repository, as commands to copy.
#[derive(Debug, Clone)]
pub struct CloneInfo {
    /// The server's base URL as clients reach it.
    pub base_url: String,
    /// The host name for ssh (`git xet shell` behind OpenSSH).
    pub ssh_host: String,
}

/// Paging of a long list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    pub page: usize,
    pub per_page: usize,
    /// Whether there is a page after this one.
    pub more: bool,
    /// The whole list's length when known.
    pub total: Option<usize>,
}

/// A directory at a revision (and, at the root, the repository's front page).
#[derive(Debug, Clone)]
pub struct TreePage {
    pub chrome: RepoChrome,
    /// The last commit that changed the directory (at the root, the commit the revision
    /// names); `None` when the repository has no commit.
    pub commit: Option<LastCommit>,
    /// "" for the root.
    pub dir: String,
    pub entries: Vec<TreeEntry>,
    pub paging: Paging,
    pub readme: Option<Readme>,
    pub clone: Option<CloneInfo>,
}

/// What a directory's page says of the last commit that changed the directory.
#[derive(Debug, Clone)]
pub enum LastCommit {
    Known(CommitSummary),
    /// Still being looked up: a large directory's page does not wait for it (git finds it
    /// by comparing the directory's trees commit after commit); a later view names it.
    Pending,
    /// None found.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Readme {
    pub path: String,
    pub body: ReadmeBody,
}

#[derive(Debug, Clone)]
pub enum ReadmeBody {
    Html(SafeHtml),
    /// Too large (or stored in LFS): linked, not shown.
    Linked,
}

/// A file at a revision.
#[derive(Debug, Clone)]
pub struct BlobPage {
    pub chrome: RepoChrome,
    pub path: String,
    pub body: BlobBody,
    /// The tensors of a `.safetensors` file, or why they could not be read.
    pub safetensors: Option<Result<SafetensorsHeader, String>>,
}

#[derive(Debug, Clone)]
pub enum BlobBody {
    /// UTF-8 text, by line (at most the shown lines; `truncated` when there are more).
    Text {
        size: u64,
        lines: Vec<String>,
        truncated: bool,
    },
    /// Bytes git holds that are not shown (binary, or over the shown size).
    Binary { size: u64, oid: String },
    /// An LFS file.
    Lfs(LfsFile),
}

#[derive(Debug, Clone)]
pub struct LfsFile {
    pub size: u64,
    pub sha256: String,
    /// The XET file hash, when this server holds the object for this repository.
    pub xet_hash: Option<String>,
}

/// A commit in a list.
#[derive(Debug, Clone)]
pub struct CommitSummary {
    pub sha: String,
    pub parents: Vec<String>,
    pub author: String,
    pub time: i64,
    pub subject: String,
}

#[derive(Debug, Clone)]
pub struct CommitsPage {
    pub chrome: RepoChrome,
    pub commits: Vec<CommitSummary>,
    pub paging: Paging,
}

/// How a commit changed a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    TypeChanged,
}

#[derive(Debug, Clone)]
pub struct Change {
    pub kind: ChangeKind,
    pub path: String,
    /// Sizes before and after (an LFS file's real size), when there is a blob.
    pub old_size: Option<u64>,
    pub new_size: Option<u64>,
    pub lfs: bool,
}

#[derive(Debug, Clone)]
pub struct CommitPage {
    pub chrome: RepoChrome,
    pub commit: CommitSummary,
    /// The message after its subject line.
    pub body: String,
    pub changes: Vec<Change>,
    /// Changed paths in all (more than listed when the commit is large).
    pub total_changes: usize,
}

/// One version of a file in its history.
#[derive(Debug, Clone)]
pub struct FileVersion {
    pub commit: CommitSummary,
    pub state: VersionState,
}

#[derive(Debug, Clone)]
pub enum VersionState {
    Plain {
        size: u64,
    },
    Lfs {
        size: u64,
        sha256: String,
        /// New vs shared with the older versions considered; `None` when this server
        /// does not hold the object.
        cost: Option<Cost>,
    },
    Deleted,
}

#[derive(Debug, Clone)]
pub struct HistoryPage {
    pub chrome: RepoChrome,
    pub path: String,
    /// Newest first.
    pub versions: Vec<FileVersion>,
    pub paging: Paging,
    /// How many versions older than each one its cost was compared with, at least.
    pub lookback: usize,
}

/// An LFS file at the default branch, for the status tab.
#[derive(Debug, Clone)]
pub struct HeadLfsFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub stored: bool,
}

/// One ref update of a push.
#[derive(Debug, Clone)]
pub struct Push {
    pub refname: String,
    pub old: String,
    pub new: String,
    pub who: String,
    pub time: i64,
}

#[derive(Debug, Clone)]
pub struct Lock {
    pub id: String,
    pub path: String,
    pub owner: String,
    pub locked_at: u64,
}

/// The storage tab: what the status page showed for one repository.
#[derive(Debug, Clone)]
pub struct StatusPage {
    pub chrome: RepoChrome,
    pub usage: Usage,
    pub lfs_files: Vec<HeadLfsFile>,
    pub lfs_total: usize,
    pub lfs_total_bytes: u64,
    pub pushes: Vec<Push>,
    pub locks: Vec<Lock>,
    /// Only the first `locks.len()` are listed.
    pub more_locks: bool,
}

/// A repository in the server's or an organization's list.
#[derive(Debug, Clone)]
pub struct RepoRow {
    pub repo: RepoInfo,
    pub usage: Usage,
    pub last_push: Option<i64>,
}

/// A push's bytes, for the storage chart: LFS bytes it brought and how many were new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushBytes {
    pub time: i64,
    pub logical: u64,
    pub new: u64,
}

/// `/` (every repository the viewer may read) or `/{org}`.
#[derive(Debug, Clone)]
pub struct ListingPage {
    /// The organization of an organization's page.
    pub org: Option<String>,
    pub total: Usage,
    /// Whether `total` is the whole server's (else the listed repositories' sum).
    pub server_wide: bool,
    pub repos: Vec<RepoRow>,
    /// The most recent pushes' bytes, oldest first.
    pub growth: Vec<PushBytes>,
}

/// An answer that is not a page of data: not found, sign in, an error.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: u16,
    pub title: String,
    pub detail: String,
    /// Offer the sign-in form (anonymous viewers of something that may need a token).
    pub offer_sign_in: bool,
}
