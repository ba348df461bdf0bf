//! Cross-repository integrity: what one repository's writer claims never decides what
//! another repository's object id serves.

use git_xet_core::hash::sha256_as_merkle;

use crate::common::*;
use crate::lfs::{basic_download, basic_upload, lfs_url};
use crate::support::{random_bytes, TestServer};

/// A writer of `evil/a` registers content E under the sha256 of a victim's file V (a shard
/// whose sha256 metadata lies). A victim's basic upload of V to another repository must
/// still store and serve V, whether or not V was already stored elsewhere.
#[test]
fn a_lying_sha256_claim_cannot_poison_another_repository() {
    let server = TestServer::start();
    let victim_data = random_bytes(300_000, 2401);
    let oid = sha256_hex(&victim_data);
    let evil = Cas::new(&server, "evil/a", "write");
    let mut fake = Upload::random(300_000, 2402, 4);
    fake.shard.files[0].sha256 = Some(sha256_as_merkle(&sha256(&victim_data)));
    // The claim is the attacker's own repository's business; it is accepted there.
    evil.upload(&fake);

    for (round, repo) in ["org/victim", "org/second"].into_iter().enumerate() {
        let token = server.token(repo, "write");
        // Round 2: the real V is now stored too (by round 1), next to the lie.
        basic_upload(&server, repo, &token, &victim_data);
        // (Not assert_eq: a failure would print 300 kB.)
        let served = basic_download(&server, repo, &token, &victim_data);
        assert!(
            served == victim_data,
            "round {round}: {repo} serves other bytes than it was sent for {oid}"
        );
        let r = client()
            .get(lfs_url(&server, repo, &format!("objects/{oid}")))
            .bearer_auth(&token)
            .header("Range", "bytes=0-9")
            .send()
            .unwrap();
        assert_eq!(r.status(), 206);
        assert_eq!(&r.bytes().unwrap()[..], &victim_data[..10], "round {round}");
    }
    // The victim's content is not the attacker's.
    let victim = Cas::new(&server, "org/victim", "read");
    let r = victim.reconstruction_raw(&fake.file_hash.to_hex(), None);
    assert_eq!(
        r.status(),
        404,
        "the attacker's file is not granted to the victim"
    );
}
