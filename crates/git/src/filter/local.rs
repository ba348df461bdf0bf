//! The filter and the per-user chunk store (docs/store.md): objects rebuilt from local
//! chunks with no network, and which whole copies stay in `.git/lfs/objects` once git has
//! the files.
//!
//! Whole objects this filter wrote or served (fetched, rebuilt, pushed by this clone, or
//! kept earlier for a checked-out file) are settled once every working tree file is written:
//! at the empty answer that ends a delayed checkout (git writes each listed file before it
//! asks again), so that git's index and hooks overlap the settling, and when git closes the
//! pipe for whatever came after. One the chunk store cannot rebuild always stays. Else,
//! with `xet.keepCheckedOut`:
//! - `auto` (the default, or `true`): kept, because git-lfs's own commands (`fsck`,
//!   `checkout`, `push`) read the checked-out version there; it shares its extents with the
//!   working tree file where the file system can (FIDEDUPERANGE: XFS with reflink, btrfs),
//!   so it costs no disk there, and is a second copy elsewhere;
//! - `false`: dropped (the smallest disk).
//!
//! Kept objects are listed per working tree file in `.git/xet/checked-out`, with the objects
//! git cleaned from it (`git add`: the version you commit and push); when a checkout gives a
//! file another version (or the file is gone), its former objects leave once the store holds
//! them, so versions other than the checked-out one do not stay whole.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::Filter;
use crate::store::KeepCheckedOut;
use git_xet_client::store::{ChunkStore, Rebuilt};
use git_xet_io::platform::extents::{dedupe, Shared};
use git_xet_lfs::objects::{pushed_dir, pushed_marker};
use git_xet_lfs::pointer::{Oid, Pointer};

/// Per working tree file, the objects it held as this filter saw them: the one a checkout
/// wrote (kept whole) and the ones git cleaned from it since.
type Kept = BTreeMap<PathBuf, BTreeSet<Oid>>;

/// Whole objects of this filter session, settled at its end.
#[derive(Debug, Default)]
pub(super) struct Wholes {
    /// `xet.keepObjects`: every whole object stays (git-lfs's layout).
    keep_objects: bool,
    keep_checked_out: KeepCheckedOut,
    /// (working tree path as git named it, object, whole copy).
    seen: Vec<(String, Pointer, PathBuf)>,
    /// Working tree paths written from a whole object this filter does not settle (never
    /// pushed, fetched by git-lfs, materialized): what `kept` said they held is theirs no more.
    others: Vec<String>,
    /// (working tree path, object) of each clean: the file's content as git stores it.
    cleaned: Vec<(String, Oid)>,
    /// `.git/xet/checked-out`, read when first needed.
    kept: Option<Kept>,
    /// The objects of `kept` and the objects marked pushed (`.git/xet/pushed`), each read
    /// once per process: a checkout asks for every file it writes from `.git/lfs/objects`.
    found_noted: Option<FoundNoted>,
    /// `.git/lfs/tmp` exists (made once, not per rebuilt file).
    tmp_made: bool,
}

/// What makes an object found whole a candidate to settle (see [`Filter::note_found`]).
#[derive(Debug, Default)]
struct FoundNoted {
    kept: HashSet<Oid>,
    pushed: HashSet<Oid>,
}

impl Wholes {
    pub(super) fn new(keep_objects: bool, keep_checked_out: KeepCheckedOut) -> Wholes {
        Wholes {
            keep_objects,
            keep_checked_out,
            ..Default::default()
        }
    }

    pub(super) fn keep_objects(&self) -> bool {
        self.keep_objects
    }
}

impl Filter {
    pub(super) fn chunks(&mut self) -> Option<&ChunkStore> {
        let repo = &self.repo;
        self.chunk_store
            .get_or_insert_with(|| crate::store::open(repo))
            .as_ref()
    }

    /// The object rebuilt from the chunk store into `.git/lfs/objects` (verified chunk by
    /// chunk and against its oid), when the store holds all of it: no network. Settled
    /// with the others at the end.
    pub(super) fn rebuild_local(&mut self, pathname: &str, pointer: &Pointer) -> Option<PathBuf> {
        let lfs = self.store.clone();
        if !self.wholes.tmp_made {
            lfs.create_tmp_dir().ok()?;
            self.wholes.tmp_made = true;
        }
        let store = self.chunks()?;
        let tmp = lfs.temp_path("rebuild");
        match store.rebuild(&pointer.oid.0, pointer.size, &tmp) {
            Ok(Rebuilt::Done) => {}
            Ok(Rebuilt::Missing) => return None,
            Ok(Rebuilt::Damaged(why)) => {
                tracing::warn!("{why}; fetching {} again", pointer.oid);
                return None;
            }
            Err(e) => {
                tracing::warn!("rebuilding {} from the chunk store: {e}", pointer.oid);
                return None;
            }
        }
        let path = lfs
            .commit(&tmp, &pointer.oid)
            .map_err(|e| tracing::warn!("{e}"))
            .ok()?;
        self.note_whole(pathname, pointer, path.clone());
        Some(path)
    }

    /// A whole object git gets for `pathname`, to settle at the end.
    pub(super) fn note_whole(&mut self, pathname: &str, pointer: &Pointer, object: PathBuf) {
        if !self.wholes.keep_objects {
            self.wholes
                .seen
                .push((pathname.to_string(), pointer.clone(), object));
        }
    }

    /// An object found whole in `.git/lfs/objects`: settled at the end like a fetched one
    /// when this clone pushed it or kept it for a checked-out file; anything else there
    /// (objects never pushed, what git-lfs fetched, what `git xet materialize` put back)
    /// is left alone.
    pub(super) fn note_found(&mut self, pathname: &str, pointer: &Pointer, object: PathBuf) {
        if self.wholes.keep_objects {
            return;
        }
        if self.found_noted_mut().has(&pointer.oid) {
            self.note_whole(pathname, pointer, object);
        } else {
            self.wholes.others.push(pathname.to_string());
        }
    }

    /// The object git stored for the content of `pathname` (a clean): it leaves
    /// `.git/lfs/objects` when a checkout gives the file another version after the push.
    pub(super) fn note_cleaned(&mut self, pathname: &str, oid: Oid) {
        if !self.wholes.keep_objects {
            self.wholes.cleaned.push((pathname.to_string(), oid));
        }
    }

    /// Read once per process, not once per file: a marker a push adds meanwhile is not seen,
    /// which only leaves that whole copy in place until the next checkout settles it.
    fn found_noted_mut(&mut self) -> &mut FoundNoted {
        if self.wholes.found_noted.is_none() {
            let kept = self.kept().values().flatten().copied().collect();
            let pushed = std::fs::read_dir(pushed_dir(&self.repo.xet_dir()))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<Oid>().ok())
                .collect();
            self.wholes.found_noted = Some(FoundNoted { kept, pushed });
        }
        self.wholes.found_noted.as_mut().expect("set above")
    }

    fn kept_path(&self) -> PathBuf {
        self.repo.xet_dir().join("checked-out")
    }

    fn kept(&mut self) -> &mut Kept {
        let path = self.kept_path();
        self.wholes.kept.get_or_insert_with(|| read_kept(&path))
    }

    /// Keeps or drops each whole object noted (see the module's comment); once git has
    /// written every file.
    pub(super) fn settle_wholes(&mut self) {
        let seen = std::mem::take(&mut self.wholes.seen);
        let others = std::mem::take(&mut self.wholes.others);
        let cleaned = std::mem::take(&mut self.wholes.cleaned);
        if seen.is_empty() && others.is_empty() && cleaned.is_empty() {
            return;
        }
        let Some(store) = self.chunks().cloned() else {
            return;
        };
        let mode = self.wholes.keep_checked_out;
        let work_tree = self.repo.work_tree.clone().unwrap_or_default();
        let before = self.kept().clone();
        let mut kept = before.clone();
        let mut keep: HashSet<Oid> = HashSet::new();
        let mut drop: HashMap<Oid, PathBuf> = HashMap::new();
        // A cleaned version is added to what the file held: the committed one stays needed
        // (HEAD, the index) until a checkout replaces it.
        for (pathname, oid) in &cleaned {
            kept.entry(work_tree.join(pathname))
                .or_default()
                .insert(*oid);
        }
        for pathname in &others {
            kept.remove(&work_tree.join(pathname));
        }
        // One "not supported" answers for the rest (one file system per work tree).
        let mut supported = true;
        for (pathname, pointer, object) in &seen {
            let file = work_tree.join(pathname);
            match mode {
                KeepCheckedOut::Keep => {
                    // Shared or not (a file changed since git wrote it), the object stays.
                    if supported && share(object, &file, pointer.size) == Shared::Unsupported {
                        supported = false;
                    }
                    keep.insert(pointer.oid);
                    kept.insert(file, BTreeSet::from([pointer.oid]));
                }
                KeepCheckedOut::Never => {
                    if !store.has(&pointer.oid.0, pointer.size) {
                        continue; // the only copy besides the server's: it stays
                    }
                    drop.insert(pointer.oid, object.clone());
                    kept.remove(&file);
                }
            }
        }
        // Files that are gone no longer keep their object.
        kept.retain(|file, _| file.exists());
        let still: HashSet<Oid> = kept.values().flatten().copied().collect();
        for oid in before.values().flatten() {
            if !still.contains(oid) && !drop.contains_key(oid) {
                let object = self.store.path(oid);
                let size = std::fs::metadata(&object).map(|m| m.len());
                if size.is_ok_and(|size| store.has(&oid.0, size)) {
                    drop.insert(*oid, object);
                }
            }
        }
        let xet_dir = self.repo.xet_dir();
        let marked = std::mem::take(&mut self.found_noted_mut().pushed);
        for (oid, object) in drop {
            if keep.contains(&oid) || still.contains(&oid) {
                continue;
            }
            let _ = std::fs::remove_file(&object);
            if marked.contains(&oid) {
                let _ = std::fs::remove_file(pushed_marker(&xet_dir, &oid));
            }
            remove_empty_fan_out(&object);
        }
        if kept != before {
            if let Err(e) = write_kept(&self.kept_path(), &kept) {
                tracing::warn!("could not record the objects kept for checked-out files: {e}");
            }
        }
        self.wholes.kept = Some(kept);
        self.wholes.found_noted = None;
    }
}

impl FoundNoted {
    fn has(&self, oid: &Oid) -> bool {
        self.pushed.contains(oid) || self.kept.contains(oid)
    }
}

/// Removes the fan-out directories (`objects/ab/cd`, `objects/ab`) a dropped object leaves
/// empty: every download walks `.git/lfs/objects` for local objects to reuse, and after a
/// checkout of many files the walk was over thousands of empty directories (it only grows
/// with history). `remove_dir` removes nothing that is not empty. A writer in this same
/// repository that made the directory for a new object an instant before finds it gone at
/// its rename: `LfsStore::replace` makes it again and renames once more; git-lfs's own
/// writer fails that object, which it retries (nothing is half-written either way).
fn remove_empty_fan_out(object: &Path) {
    for dir in object.ancestors().skip(1).take(2) {
        if std::fs::remove_dir(dir).is_err() {
            return;
        }
    }
}

/// Makes `file` (the working tree's) share `object`'s extents. Opened for writing only as
/// the kernel asks of a dedupe destination: nothing is written.
fn share(object: &Path, file: &Path, size: u64) -> Shared {
    let (Ok(src), Ok(dst)) = (
        std::fs::File::open(object),
        std::fs::File::options().read(true).write(true).open(file),
    ) else {
        return Shared::Differs;
    };
    if dst.metadata().map(|m| m.len()).ok() != Some(size) {
        return Shared::Differs;
    }
    dedupe(&src, &dst, size).unwrap_or_else(|e| {
        tracing::debug!("sharing extents of {}: {e}", file.display());
        Shared::Differs
    })
}

/// `<oid> <path>` lines, a file on as many lines as it has objects; anything unreadable is
/// skipped (it only means an object stays).
fn read_kept(path: &Path) -> Kept {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut kept = Kept::new();
    for line in text.lines() {
        let Some((oid, file)) = line.split_once(' ') else {
            continue;
        };
        let Ok(oid) = git_xet_core::lfs::parse_oid(oid) else {
            continue;
        };
        kept.entry(PathBuf::from(file))
            .or_default()
            .insert(Oid(oid));
    }
    kept
}

fn write_kept(path: &Path, kept: &Kept) -> std::io::Result<()> {
    let mut text = String::new();
    for (file, oids) in kept {
        let Some(file) = file.to_str().filter(|f| !f.contains('\n')) else {
            continue;
        };
        for oid in oids {
            text += &format!("{oid} {file}\n");
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_list_holds_several_objects_per_file_and_skips_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xet/checked-out");
        let (a, b) = (Oid([1; 32]), Oid([2; 32]));
        let mut kept = Kept::new();
        kept.insert("/w/m.bin".into(), BTreeSet::from([a, b]));
        kept.insert("/w/s.bin".into(), BTreeSet::from([b]));
        kept.insert("/w/new\nline".into(), BTreeSet::from([a]));
        write_kept(&path, &kept).unwrap();
        kept.remove(Path::new("/w/new\nline"));
        assert_eq!(read_kept(&path), kept);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("junk\nzz /w/x\n{text}")).unwrap();
        assert_eq!(read_kept(&path), kept);
    }
}
