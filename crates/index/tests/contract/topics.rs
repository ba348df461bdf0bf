//! The index topics (locks, tokens, sha256 claims, gc) in the `Index` contract: run on both
//! backends by `contract`, two handles on one database standing for two server processes.

use git_xet_core::MerkleHash;
use git_xet_index::RepoName;
use git_xet_index::{DedupDomain, IndexError, LockOutcome, LockQuery, TokenRecord};

use super::{file, hash, shard, xorb, Opener};

/// The topics' cases, by name.
pub(super) const CASES: [super::Case; 7] = [
    ("locks", locks),
    ("concurrent_locks", concurrent_locks),
    ("tokens", tokens),
    ("sha256_claims", sha256_claims),
    ("lookups_of_many_objects", lookups_of_many_objects),
    ("gc_condemn_refuse_delete", gc_condemn_refuse_delete),
    ("gc_races_registrations", gc_races_registrations),
];

/// Create, conflict (through the other handle), list in pages, filters, unlock.
fn locks(open: &Opener) {
    let (a, b) = (open(), open());
    let repo = RepoName::parse("locks/art").unwrap();
    let other = RepoName::parse("locks/code").unwrap();
    let LockOutcome::Created(held) = a.create_lock(&repo, "a.psd", "alice", "0001", 7).unwrap()
    else {
        panic!("first lock not created");
    };
    assert_eq!((held.owner.as_str(), held.locked_at), ("alice", 7));
    assert_eq!(
        b.create_lock(&repo, "a.psd", "bob", "0002", 8).unwrap(),
        LockOutcome::Exists(held.clone()),
        "the path is held: the holder's lock comes back"
    );
    assert!(matches!(
        b.create_lock(&other, "a.psd", "bob", "0002", 8).unwrap(),
        LockOutcome::Created(_)
    ));
    for i in 3..8 {
        let id = format!("{i:04}");
        b.create_lock(&repo, &format!("f{i}.bin"), "bob", &id, 9)
            .unwrap();
    }
    let mut query = LockQuery {
        limit: 2,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = a.locks(&repo, &query).unwrap();
        assert!(page.locks.len() <= 2);
        seen.extend(page.locks.into_iter().map(|l| l.id));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ["0001", "0003", "0004", "0005", "0006", "0007"]);
    let by_path = LockQuery {
        path: Some("f5.bin".into()),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(a.locks(&repo, &by_path).unwrap().locks[0].id, "0005");
    let by_id = LockQuery {
        id: Some("0001".into()),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(b.locks(&repo, &by_id).unwrap().locks, vec![held.clone()]);
    assert_eq!(b.delete_lock(&other, "0001").unwrap(), None, "other repo");
    assert_eq!(b.delete_lock(&repo, "0001").unwrap(), Some(held));
    assert_eq!(a.delete_lock(&repo, "0001").unwrap(), None);
    assert!(matches!(
        a.create_lock(&repo, "a.psd", "bob", "0008", 10).unwrap(),
        LockOutcome::Created(_)
    ));
}

/// Eight users lock one path at once through two handles: one wins, all see its lock.
fn concurrent_locks(open: &Opener) {
    let handles = [open(), open()];
    let repo = RepoName::parse("locks/race").unwrap();
    let outcomes: Vec<LockOutcome> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let index = handles[i % 2].clone();
                let repo = &repo;
                scope.spawn(move || {
                    let (user, id) = (format!("user{i}"), format!("race{i}"));
                    index.create_lock(repo, "model.bin", &user, &id, 1).unwrap()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let created: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            LockOutcome::Created(l) => Some(l.clone()),
            LockOutcome::Exists(_) => None,
        })
        .collect();
    assert_eq!(created.len(), 1, "{outcomes:?}");
    for o in &outcomes {
        if let LockOutcome::Exists(l) = o {
            assert_eq!(l, &created[0]);
        }
    }
}

/// Record through one handle, list and revoke through the other.
fn tokens(open: &Opener) {
    let (a, b) = (open(), open());
    let record = |id: &str, created: u64| TokenRecord {
        id: id.into(),
        user: "alice".into(),
        repo: "tok/repo".into(),
        scope: "write".into(),
        created,
        expires: created + 3600,
        revoked: false,
    };
    a.record_token(&record("tok-b", 20)).unwrap();
    a.record_token(&record("tok-a", 10)).unwrap();
    assert!(
        b.record_token(&record("tok-a", 30)).is_err(),
        "a second record with the same id"
    );
    let listed: Vec<TokenRecord> = b
        .tokens()
        .unwrap()
        .into_iter()
        .filter(|t| t.id.starts_with("tok-"))
        .collect();
    assert_eq!(listed, vec![record("tok-a", 10), record("tok-b", 20)]);
    assert!(!a.token_revoked("tok-a").unwrap());
    assert!(b.revoke_token("tok-a").unwrap());
    assert!(!b.revoke_token("tok-none").unwrap());
    assert!(a.token_revoked("tok-a").unwrap());
    assert!(!a.token_revoked("tok-b").unwrap());
    assert!(!a.token_revoked("tok-none").unwrap());
    let revoked = a.tokens().unwrap();
    assert!(revoked.iter().any(|t| t.id == "tok-a" && t.revoked));
}

/// The Batch API's lookups of many objects in one query answer, in order (repeats too),
/// what one lookup per object answers; other repositories' files are not found.
fn lookups_of_many_objects(open: &Opener) {
    let (a, b) = (open(), open());
    let x = xorb(190, &[hash(19, 1), hash(19, 2)]);
    a.register_xorb(&x).unwrap();
    let (f1, f2, f3) = (file(191, &x), file(192, &x), file(193, &x));
    a.register_shard(&shard(194, "many/one", &[f1.clone(), f2.clone()]))
        .unwrap();
    a.register_shard(&shard(195, "many/two", std::slice::from_ref(&f3)))
        .unwrap();
    let one = RepoName::parse("many/one").unwrap();
    let asked = [f2.sha256, [198; 32], f1.sha256, f3.sha256, f2.sha256];
    let found = b.repo_files_by_sha256(&one, &asked).unwrap();
    let expected = vec![
        Some(f2.clone()),
        None,
        Some(f1.clone()),
        None,
        Some(f2.clone()),
    ];
    assert_eq!(found, expected);
    let one_by_one: Vec<_> = asked
        .iter()
        .map(|s| b.repo_file_by_sha256(&one, s).unwrap())
        .collect();
    assert_eq!(found, one_by_one);
    assert!(b.repo_files_by_sha256(&one, &[]).unwrap().is_empty());

    b.record_verified_sha256(&f2.file_hash, &[8; 32]).unwrap();
    let hashes = [f1.file_hash, f2.file_hash, hash(199, 0), f2.file_hash];
    assert_eq!(
        a.verified_sha256s(&hashes).unwrap(),
        vec![None, Some([8; 32]), None, Some([8; 32])]
    );
    assert!(a.verified_sha256s(&[]).unwrap().is_empty());
}

/// A verified sha256 is recorded once (the first stays); a false claim is dropped in its
/// repository only.
fn sha256_claims(open: &Opener) {
    let (a, b) = (open(), open());
    let x = xorb(60, &[hash(6, 1), hash(6, 2)]);
    a.register_xorb(&x).unwrap();
    let f = file(61, &x);
    a.register_shard(&shard(62, "sha/one", std::slice::from_ref(&f)))
        .unwrap();
    a.register_shard(&shard(63, "sha/two", std::slice::from_ref(&f)))
        .unwrap();
    assert_eq!(b.verified_sha256(&f.file_hash).unwrap(), None);
    b.record_verified_sha256(&f.file_hash, &[7; 32]).unwrap();
    a.record_verified_sha256(&f.file_hash, &[8; 32]).unwrap();
    assert_eq!(a.verified_sha256(&f.file_hash).unwrap(), Some([7; 32]));
    let one = RepoName::parse("sha/one").unwrap();
    let two = RepoName::parse("sha/two").unwrap();
    let mut claims = b.sha256_claims(&f.file_hash).unwrap();
    claims.sort_by(|p, q| p.repo.as_str().cmp(q.repo.as_str()));
    assert_eq!(claims.len(), 2);
    assert_eq!(
        (claims[0].repo.clone(), claims[0].sha256),
        (one.clone(), f.sha256)
    );
    assert!(
        !a.drop_sha256_claim(&one, &f.file_hash, &[9; 32]).unwrap(),
        "not its claim"
    );
    assert!(b.drop_sha256_claim(&one, &f.file_hash, &f.sha256).unwrap());
    assert!(!a.repo_has_file(&one, &f.file_hash).unwrap());
    assert!(a.repo_has_file(&two, &f.file_hash).unwrap());
    assert_eq!(a.sha256_claims(&f.file_hash).unwrap().len(), 1);
}

fn collected(result: Result<impl std::fmt::Debug, IndexError>, hash: &MerkleHash) {
    match result {
        Err(IndexError::XorbCollected(h)) => assert_eq!(&h, hash),
        other => panic!("expected XorbCollected({hash}), got {other:?}"),
    }
}

/// gc's steps through the index: a referenced xorb is spared, an unreferenced one condemned;
/// a condemned xorb is refused by registrations (through the other handle too) and hidden
/// from dedup; forgotten, it is gone; after repo delete its files become unreachable, are
/// unregistered and their xorb can be condemned.
fn gc_condemn_refuse_delete(open: &Opener) {
    let (a, b) = (open(), open());
    let kept = xorb(70, &[hash(7, 1), hash(7, 2)]);
    let doomed = xorb(71, &[hash(7, 3), hash(7, 4)]);
    a.register_xorb(&kept).unwrap();
    a.register_xorb(&doomed).unwrap();
    let f = file(72, &kept);
    let repo = RepoName::parse("gc/doomed").unwrap();
    a.register_shard(&shard(73, repo.as_str(), std::slice::from_ref(&f)))
        .unwrap();
    // Warm the other handle's layout cache: a condemned xorb must not be served from it.
    assert_eq!(
        b.chunk_location(&hash(7, 3), &DedupDomain::Server).unwrap(),
        Some((doomed.hash(), 0))
    );

    let stranger = hash(74, 0xffff); // stored, never indexed
    let mut condemned = b
        .condemn_xorbs(&[kept.hash(), doomed.hash(), stranger])
        .unwrap();
    condemned.sort_by(|p, q| p.as_bytes().cmp(q.as_bytes()));
    let mut want = vec![doomed.hash(), stranger];
    want.sort_by(|p, q| p.as_bytes().cmp(q.as_bytes()));
    assert_eq!(condemned, want, "the referenced xorb is spared");
    let mut marks = a.condemned_xorbs().unwrap();
    marks.sort_by(|p, q| p.as_bytes().cmp(q.as_bytes()));
    assert_eq!(marks, want);

    collected(a.register_xorb(&doomed), &doomed.hash());
    let late = file(75, &doomed);
    let late_shard = shard(76, "gc/late", std::slice::from_ref(&late));
    collected(a.register_shard(&late_shard), &doomed.hash());
    collected(b.register_shard(&late_shard), &doomed.hash());
    assert!(
        a.file(&late.file_hash, &DedupDomain::Server)
            .unwrap()
            .is_none(),
        "nothing half-registered"
    );
    assert_eq!(
        a.chunk_location(&hash(7, 3), &DedupDomain::Server).unwrap(),
        None,
        "dedup skips it"
    );
    assert_eq!(
        b.chunk_location(&hash(7, 3), &DedupDomain::Server).unwrap(),
        None,
        "dedup skips it"
    );
    assert_eq!(
        b.chunk_location(&hash(7, 1), &DedupDomain::Server).unwrap(),
        Some((kept.hash(), 0))
    );

    // The object is deleted, then forgotten.
    b.forget_xorb(&doomed.hash()).unwrap();
    b.forget_xorb(&stranger).unwrap();
    assert!(a.condemned_xorbs().unwrap().is_empty());
    let indexed = a.indexed_xorbs().unwrap();
    assert!(!indexed.iter().any(|x| x.hash == doomed.hash()));
    let k = indexed.iter().find(|x| x.hash == kept.hash()).unwrap();
    assert_eq!(k.stored_len, kept.stored_len);
    assert!(a.xorb(&doomed.hash()).unwrap().is_none());
    collected(a.register_shard(&late_shard), &doomed.hash());
    // Uploaded again, it can be referenced again.
    assert!(a.register_xorb(&doomed).unwrap());
    assert!(b.register_shard(&late_shard).unwrap().changed());

    // repo delete: its files become unreachable; gc unregisters them and condemns the xorb.
    assert!(b.referenced_xorbs().unwrap().contains(&kept.hash()));
    assert!(a.create_lock(&repo, "x.bin", "alice", "gc-lock", 1).is_ok());
    assert_eq!(a.delete_repo_files(&repo).unwrap(), 1);
    assert!(b
        .locks(
            &repo,
            &LockQuery {
                limit: 10,
                ..Default::default()
            }
        )
        .unwrap()
        .locks
        .is_empty());
    assert!(!b.referenced_xorbs().unwrap().contains(&kept.hash()));
    let unreachable = b.unregister_unreachable_files(true).unwrap();
    assert!(unreachable >= 1);
    assert!(
        a.file(&f.file_hash, &DedupDomain::Server)
            .unwrap()
            .is_some(),
        "dry run"
    );
    assert_eq!(b.unregister_unreachable_files(false).unwrap(), unreachable);
    assert!(a
        .file(&f.file_hash, &DedupDomain::Server)
        .unwrap()
        .is_none());
    assert!(!a.any_file_registered(&[f.file_hash]).unwrap());
    assert!(a
        .any_file_registered(&[f.file_hash, late.file_hash])
        .unwrap());
    assert_eq!(a.condemn_xorbs(&[kept.hash()]).unwrap(), vec![kept.hash()]);

    // Shards, and files in pages.
    let shard_hash = shard(73, repo.as_str(), &[]).shard_hash;
    assert!(b
        .indexed_shards()
        .unwrap()
        .iter()
        .any(|s| s.hash == shard_hash && s.len == 1000));
    a.forget_shard(&shard_hash).unwrap();
    assert!(!b
        .indexed_shards()
        .unwrap()
        .iter()
        .any(|s| s.hash == shard_hash));
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = b.files_page(after.as_ref(), 2).unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        after = page.last().map(|f| f.file_hash);
        paged.extend(page.into_iter().map(|f| f.file_hash));
    }
    assert!(
        paged.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()),
        "in hash order"
    );
    assert_eq!(paged.len() as u64, a.stats().unwrap().files);
    assert!(paged.contains(&late.file_hash));
}

/// gc condemning a xorb while another handle registers a shard that references it, many
/// times: each round, either the registration wins (and the xorb is spared) or the
/// condemnation does (and the registration is refused). Never both.
fn gc_races_registrations(open: &Opener) {
    let (a, b) = (open(), open());
    for round in 0..24u32 {
        let x = xorb(80, &[hash(8, 2 * round + 1000), hash(8, 2 * round + 1001)]);
        // Distinct xorb hash per round.
        let x = git_xet_index::XorbMeta {
            footer: git_xet_core::xorb::XorbFooter {
                hash: hash(81, round),
                ..x.footer
            },
            ..x
        };
        a.register_xorb(&x).unwrap();
        let f = super::FileRecord {
            file_hash: hash(82, round),
            ..file(82, &x)
        };
        let s = shard(83, "gc/race", std::slice::from_ref(&f));
        let s = git_xet_index::ShardRegistration {
            shard_hash: hash(84, round),
            ..s
        };
        let (registered, condemned) = std::thread::scope(|scope| {
            let reg = scope.spawn(|| a.register_shard(&s));
            let gc = scope.spawn(|| b.condemn_xorbs(&[x.hash()]).unwrap());
            (reg.join().unwrap(), gc.join().unwrap())
        });
        let was_condemned = condemned.contains(&x.hash());
        match registered {
            Ok(_) => assert!(!was_condemned, "round {round}: registered and condemned"),
            Err(IndexError::XorbCollected(_)) => assert!(was_condemned, "round {round}"),
            Err(e) => panic!("round {round}: {e}"),
        }
        let referenced = a
            .file(&f.file_hash, &DedupDomain::Server)
            .unwrap()
            .is_some();
        assert_eq!(referenced, !was_condemned, "round {round}");
        if was_condemned {
            b.forget_xorb(&x.hash()).unwrap();
        }
    }
}
