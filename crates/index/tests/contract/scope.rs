//! Dedup scope in the `Index` contract (crates/index/src/scope.rs): which repositories hold
//! a xorb, the scoped lookups, what repo delete and gc do to holders, and the upgrade of an
//! index written before scopes existed.

use git_xet_index::RepoName;
use git_xet_index::{DedupDomain, DedupScope, IndexError};

use super::{file, hash, shard, xorb, Opener};

fn repo(name: &str) -> RepoName {
    RepoName::parse(name).unwrap()
}

fn in_repo(name: &str) -> DedupDomain {
    DedupScope::Repo.domain(&repo(name))
}

fn in_org(name: &str) -> DedupDomain {
    DedupScope::Org.domain(&repo(name))
}

/// Two scopes store the same chunks in two xorbs: each finds its own copy only, and a xorb
/// no repository holds is found by the whole server only.
pub(super) fn holders_and_scoped_lookups(open: &Opener) {
    let (a, b) = (open(), open());
    let chunks = [hash(158, 1), hash(158, 2)];
    let x1 = xorb(150, &chunks);
    let x2 = xorb(151, &chunks);
    a.register_xorb(&x1).unwrap();
    b.register_xorb(&x2).unwrap();
    let server = DedupDomain::Server;
    // Indexed, held by nobody yet: the server sees it, no scope does.
    assert_eq!(
        b.chunk_location(&chunks[0], &server).unwrap(),
        Some((x1.hash(), 0))
    );
    assert_eq!(
        b.chunk_location(&chunks[0], &in_repo("s1/a")).unwrap(),
        None
    );
    assert!(b.xorb_in_domain(&x1.hash(), &server).unwrap());
    assert!(!b.xorb_in_domain(&x1.hash(), &in_org("s1/a")).unwrap());

    // An upload makes its repository a holder; the answer says whether its scope held it.
    assert!(!a
        .add_xorb_holder(&x1.hash(), &repo("s1/a"), &in_repo("s1/a"))
        .unwrap());
    assert!(b
        .add_xorb_holder(&x1.hash(), &repo("s1/a"), &in_repo("s1/a"))
        .unwrap());
    assert!(!b
        .add_xorb_holder(&x1.hash(), &repo("s1/c"), &in_repo("s1/c"))
        .unwrap());
    assert!(!b
        .add_xorb_holder(&x2.hash(), &repo("s2/b"), &in_org("s2/b"))
        .unwrap());
    for (domain, want) in [
        (in_repo("s1/a"), Some((x1.hash(), 0))),
        (in_org("s1/x"), Some((x1.hash(), 0))),
        // Its own copy, though another scope's is older.
        (in_repo("s2/b"), Some((x2.hash(), 0))),
        (in_org("s2/z"), Some((x2.hash(), 0))),
        (in_repo("s1/other"), None),
        (in_org("s"), None),
        (in_org("s10/a"), None),
        (in_org("s3/a"), None),
    ] {
        assert_eq!(
            a.chunk_location(&chunks[1], &domain)
                .unwrap()
                .map(|(x, _)| x),
            want.map(|w| w.0),
            "{domain:?}"
        );
        assert_eq!(
            b.xorb_in_domain(&x1.hash(), &domain).unwrap(),
            want.map(|w| w.0) == Some(x1.hash()),
            "{domain:?}"
        );
    }
    assert!(!b.xorb_in_domain(&hash(159, 1), &in_repo("s1/a")).unwrap());
    match a.add_xorb_holder(&hash(159, 1), &repo("s1/a"), &in_repo("s1/a")) {
        Err(IndexError::XorbCollected(_)) => {}
        other => panic!("a xorb that is not indexed has no holder: {other:?}"),
    }

    // A shard's repository holds what its files reference; its files start dedup in its
    // scope only.
    let f = file(152, &x1);
    a.register_shard(&shard(153, "s4/d", std::slice::from_ref(&f)))
        .unwrap();
    assert!(b.xorb_in_domain(&x1.hash(), &in_repo("s4/d")).unwrap());
    let first = hash(152, 1);
    assert_eq!(
        b.files_starting_with(&first, 10, &in_org("s4/x")).unwrap(),
        vec![f.file_hash]
    );
    assert_eq!(
        b.files_starting_with(&first, 10, &server).unwrap(),
        vec![f.file_hash]
    );
    assert!(b
        .files_starting_with(&first, 10, &in_org("s1/a"))
        .unwrap()
        .is_empty());

    // repo delete: the repository holds nothing any more; the others keep their holds.
    b.delete_repo_files(&repo("s1/a")).unwrap();
    assert!(!a.xorb_in_domain(&x1.hash(), &in_repo("s1/a")).unwrap());
    assert!(a.xorb_in_domain(&x1.hash(), &in_repo("s1/c")).unwrap());
    assert!(a.xorb_in_domain(&x1.hash(), &in_org("s1/a")).unwrap());

    // gc: an unreferenced xorb's holders go with it, and do not keep it.
    assert_eq!(b.condemn_xorbs(&[x2.hash()]).unwrap(), vec![x2.hash()]);
    assert_eq!(
        a.chunk_location(&chunks[0], &in_repo("s2/b")).unwrap(),
        None
    );
    b.forget_xorb(&x2.hash()).unwrap();
    assert!(!a.xorb_in_domain(&x2.hash(), &in_repo("s2/b")).unwrap());
    assert!(a.register_xorb(&x2).unwrap(), "uploaded again after gc");
    assert!(
        !a.add_xorb_holder(&x2.hash(), &repo("s2/b"), &in_repo("s2/b"))
            .unwrap(),
        "the old hold did not survive gc"
    );
}

/// An index written before scopes (SQL that undoes the upgrade: `downgrade`) is upgraded on
/// open: xorbs are held by the repositories whose files reference them, and every chunk of
/// every xorb is located.
pub(super) fn upgrade_from_unscoped(open: &Opener, downgrade: &dyn Fn()) {
    let index = open();
    let chunks = [hash(166, 1), hash(166, 2)];
    let (x1, x2) = (xorb(160, &chunks), xorb(161, &chunks));
    index.register_xorb(&x1).unwrap();
    index.register_xorb(&x2).unwrap();
    let (f1, f2) = (file(162, &x1), file(163, &x2));
    index
        .register_shard(&shard(164, "u1/a", std::slice::from_ref(&f1)))
        .unwrap();
    index
        .register_shard(&shard(165, "u2/b", std::slice::from_ref(&f2)))
        .unwrap();
    drop(index);
    downgrade();
    let index = open();
    assert!(index.xorb_in_domain(&x1.hash(), &in_repo("u1/a")).unwrap());
    assert!(!index.xorb_in_domain(&x1.hash(), &in_org("u2/a")).unwrap());
    assert!(index.xorb_in_domain(&x2.hash(), &in_org("u2/z")).unwrap());
    assert_eq!(
        index.chunk_location(&chunks[1], &in_repo("u2/b")).unwrap(),
        Some((x2.hash(), 1)),
        "the second xorb's chunks are located too"
    );
    assert_eq!(
        index
            .chunk_location(&chunks[1], &DedupDomain::Server)
            .unwrap(),
        Some((x1.hash(), 1))
    );
    assert_eq!(
        index
            .files_starting_with(&hash(163, 1), 5, &in_repo("u2/b"))
            .unwrap(),
        vec![f2.file_hash]
    );
    // Existing file records belong to the whole server: each repository is served them.
    assert_eq!(
        index.repo_file(&repo("u2/b"), &f2.file_hash).unwrap(),
        Some(f2.clone())
    );
}

/// File records per dedup domain: two repositories of different scopes register one file
/// (one file hash) made of their own xorbs. Each is served its own record, lookups in a
/// domain never give another domain's, a registration in the whole-server domain is served
/// the server's record (as before scopes), gc keeps each record's xorbs while its repository
/// has the file, and `check` walks every record.
pub(super) fn file_records_per_domain(open: &Opener) {
    let (a, b) = (open(), open());
    let chunks = [hash(170, 1), hash(170, 2)];
    let (xa, xb) = (xorb(171, &chunks), xorb(172, &chunks));
    a.register_xorb(&xa).unwrap();
    b.register_xorb(&xb).unwrap();
    let fa = file(173, &xa);
    let fb = git_xet_index::FileRecord {
        terms: file(173, &xb).terms,
        ..fa.clone()
    };
    let scoped =
        |tag: u8, name: &str, f: &git_xet_index::FileRecord| git_xet_index::ShardRegistration {
            domain: in_repo(name),
            ..shard(tag, name, std::slice::from_ref(f))
        };
    a.register_shard(&scoped(174, "f1/a", &fa)).unwrap();
    let out = b.register_shard(&scoped(175, "f2/b", &fb)).unwrap();
    assert_eq!((out.new_files, out.new_repo_files), (0, 1));
    let h = fa.file_hash;
    let terms = |r: Option<git_xet_index::FileRecord>| r.map(|f| f.terms);
    assert_eq!(
        terms(b.repo_file(&repo("f1/a"), &h).unwrap()),
        Some(fa.terms.clone())
    );
    assert_eq!(
        terms(a.repo_file(&repo("f2/b"), &h).unwrap()),
        Some(fb.terms.clone())
    );
    assert_eq!(a.repo_file(&repo("f3/none"), &h).unwrap(), None);
    assert_eq!(
        terms(a.repo_file_by_sha256(&repo("f2/b"), &fb.sha256).unwrap()),
        Some(fb.terms.clone()),
        "the LFS oid of f2/b names its own record"
    );
    assert_eq!(
        terms(a.file(&h, &in_repo("f2/b")).unwrap()),
        Some(fb.terms.clone())
    );
    assert_eq!(
        terms(a.file(&h, &in_org("f2/zz")).unwrap()),
        Some(fb.terms.clone())
    );
    assert_eq!(
        terms(a.file(&h, &in_org("f1/zz")).unwrap()),
        Some(fa.terms.clone())
    );
    assert_eq!(
        a.file(&h, &in_repo("f2/c")).unwrap(),
        None,
        "no record in f2/c"
    );
    assert_eq!(
        terms(a.file(&h, &DedupDomain::Server).unwrap()),
        Some(fa.terms.clone()),
        "the server's record is the first registration's"
    );
    // Registered in the whole-server domain: served the server's record, as before scopes.
    a.register_shard(&shard(176, "f3/c", std::slice::from_ref(&fb)))
        .unwrap();
    assert_eq!(
        terms(a.repo_file(&repo("f3/c"), &h).unwrap()),
        Some(fa.terms.clone())
    );

    // check walks both records; gc keeps both xorbs, then f2/b's goes with f2/b.
    let page = b.files_page(None, 100).unwrap();
    let records: Vec<_> = page.iter().filter(|f| f.file_hash == h).collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0].terms, fa.terms, "the server's record first");
    assert_eq!(records[1].terms, fb.terms);
    let live = b.referenced_xorbs().unwrap();
    assert!(live.contains(&xa.hash()) && live.contains(&xb.hash()));
    assert_eq!(b.condemn_xorbs(&[xb.hash()]).unwrap(), vec![]);
    b.delete_repo_files(&repo("f2/b")).unwrap();
    assert!(!b.referenced_xorbs().unwrap().contains(&xb.hash()));
    b.unregister_unreachable_files(false).unwrap();
    assert!(
        b.file(&h, &DedupDomain::Server).unwrap().is_some(),
        "f1/a, f3/c have it"
    );
    assert_eq!(b.condemn_xorbs(&[xb.hash()]).unwrap(), vec![xb.hash()]);
    assert_eq!(b.condemn_xorbs(&[xa.hash()]).unwrap(), vec![]);
    assert_eq!(
        terms(a.repo_file(&repo("f1/a"), &h).unwrap()),
        Some(fa.terms.clone())
    );
}
