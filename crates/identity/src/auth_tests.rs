//! Tests of auth.rs (kept apart: the module is long enough).
use super::*;

fn keys() -> Keys {
    Keys::from_secret(&[7; 32])
}

fn repo(s: &str) -> RepoName {
    RepoName::parse(s).unwrap()
}

#[test]
fn issued_tokens_verify_and_carry_claims() {
    let (token, exp) = issue(&keys(), &repo("org/m"), Scope::Write, 60);
    let claims = verify(&keys(), &token, now_secs()).unwrap();
    assert_eq!(
        (claims.repo.as_str(), claims.scope, claims.exp),
        ("org/m", Scope::Write, exp)
    );
}

#[test]
fn tampered_foreign_and_expired_tokens_are_refused() {
    let (token, exp) = issue(&keys(), &repo("org/m"), Scope::Read, 60);
    let other = Keys::from_secret(&[8; 32]);
    assert!(matches!(
        verify(&other, &token, now_secs()),
        Err(AuthError::Unauthenticated(_))
    ));
    let mut bytes = token.clone().into_bytes();
    bytes[10] ^= 1;
    let tampered = String::from_utf8(bytes).unwrap();
    assert!(verify(&keys(), &tampered, now_secs()).is_err());
    assert!(verify(&keys(), &token, exp).is_err(), "expired at exp");
    assert!(verify(&keys(), "garbage", 0).is_err());
}

const U: Accepts = Accepts::UserTokens;

#[test]
fn transfer_tokens_are_capped_by_their_parent_and_refused_where_users_are_needed() {
    let parent_exp = now_secs() + 20;
    let (token, exp) = issue_transfer(
        &keys(),
        &repo("org/m"),
        Scope::Write,
        3600,
        Some(parent_exp),
        None,
    );
    assert_eq!(exp, parent_exp);
    let claims = verify(&keys(), &token, now_secs()).unwrap();
    assert!(claims.transfer);
    let mut headers = HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let r = Some(&repo("org/m"));
    assert!(matches!(
        authorize(&keys(), &headers, r, Scope::Read, false, U),
        Err(AuthError::Forbidden(_))
    ));
    let ok = authorize(
        &keys(),
        &headers,
        r,
        Scope::Write,
        false,
        Accepts::TransferTokens,
    );
    assert_eq!(ok.unwrap().exp, Some(parent_exp));
    let (_, uncapped) = issue_transfer(&keys(), &repo("org/m"), Scope::Read, 60, None, None);
    assert!(uncapped <= now_secs() + 60);
}

#[test]
fn scopes_and_repositories_are_enforced() {
    let (token, _) = issue(&keys(), &repo("org/m"), Scope::Read, 60);
    let mut headers = HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    assert!(authorize(
        &keys(),
        &headers,
        Some(&repo("org/m")),
        Scope::Read,
        false,
        U
    )
    .is_ok());
    let wrong_scope = authorize(
        &keys(),
        &headers,
        Some(&repo("org/m")),
        Scope::Write,
        false,
        U,
    );
    assert!(matches!(wrong_scope, Err(AuthError::Forbidden(_))));
    let wrong_repo = authorize(
        &keys(),
        &headers,
        Some(&repo("org/x")),
        Scope::Read,
        false,
        U,
    );
    // Not found, whether org/x exists or not.
    assert!(matches!(wrong_repo, Err(AuthError::NotReached(_))));
    let basic = STANDARD.encode(format!("anyone:{token}"));
    headers.insert("authorization", format!("Basic {basic}").parse().unwrap());
    assert!(authorize(&keys(), &headers, None, Scope::Read, false, U).is_ok());
    let none = HeaderMap::new();
    assert!(matches!(
        authorize(&keys(), &none, None, Scope::Read, true, U),
        Err(AuthError::Unauthenticated(_))
    ));
    assert!(
        authorize(&keys(), &none, Some(&repo("a")), Scope::Read, true, U)
            .unwrap()
            .anonymous
    );
    assert!(authorize(&keys(), &none, Some(&repo("a")), Scope::Write, true, U).is_err());
}

#[test]
fn tokens_carry_their_holder_to_what_is_minted_from_them() {
    let alice = Holder {
        id: "t1".into(),
        user: "alice".into(),
    };
    let (token, exp) = issue_for(&keys(), &repo("org/m"), Scope::Admin, 60, &alice);
    let mut headers = HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let access = authorize(&keys(), &headers, None, Scope::Write, false, U).unwrap();
    assert_eq!(
        (access.holder.as_ref(), access.scope),
        (Some(&alice), Scope::Admin)
    );
    assert_eq!(access.user(), Some("alice"));
    let (child, _) = issue_transfer(
        &keys(),
        &repo("org/m"),
        Scope::Read,
        60,
        Some(exp),
        access.holder.as_ref(),
    );
    let claims = verify(&keys(), &child, now_secs()).unwrap();
    assert_eq!((claims.id.as_str(), claims.user.as_str()), ("t1", "alice"));
    let (default, _) = issue(&keys(), &repo("org/m"), Scope::Read, 60);
    let claims = verify(&keys(), &default, now_secs()).unwrap();
    assert_eq!(claims.user, claims.id, "the user defaults to the id");
    assert!(Scope::Admin > Scope::Write && Scope::parse("admin") == Some(Scope::Admin));
}

#[test]
fn tokens_from_before_ids_are_refused_with_a_request_to_recreate_them() {
    // The payload an older server signed: no id, no user.
    let payload = URL_SAFE_NO_PAD
        .encode(br#"{"repo":"org/m","scope":"write","iat":1,"exp":99999999999,"nonce":"00"}"#);
    let signed = format!("{PREFIX}{payload}");
    let mac = URL_SAFE_NO_PAD.encode(keys().token_mac(signed.as_bytes()).as_bytes());
    match verify(&keys(), &format!("{signed}.{mac}"), now_secs()) {
        Err(AuthError::Unauthenticated(m)) => assert!(m.contains("re-create"), "{m}"),
        other => panic!("old token accepted or wrongly refused: {other:?}"),
    }
    assert!(valid_user("Jane Doe") && !valid_user("") && !valid_user("a\nb"));
    assert!(!valid_user(&"x".repeat(MAX_USER_LEN + 1)));
}

#[test]
fn rule_tokens_cover_their_rules_and_single_repo_tokens_keep_their_old_form() {
    let alice = Holder {
        id: "t1".into(),
        user: "alice".into(),
    };
    let rule = |s: &str| Rule::parse(s, Scope::Read, Scope::Admin).unwrap();
    // One repository: the very payload servers before rules signed and read.
    let (one, _) = issue_rules(&keys(), &[rule("org/m:write")], 60, &alice).unwrap();
    let claims = verify(&keys(), &one, now_secs()).unwrap();
    assert!(claims.rules.is_empty() && claims.repo == "org/m");
    let payload = one.strip_prefix(PREFIX).unwrap().split('.').next().unwrap();
    let json = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    assert!(!json.contains("rules"), "{json}");

    let rules = [rule("team/*:write"), rule("org/m")];
    let (token, _) = issue_rules(&keys(), &rules, 60, &alice).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let on = |r: &str, need| authorize(&keys(), &headers, Some(&repo(r)), need, false, U);
    assert_eq!(on("team/x", Scope::Write).unwrap().scope, Scope::Write);
    assert_eq!(on("org/m", Scope::Read).unwrap().user(), Some("alice"));
    for (r, need) in [("org/m", Scope::Write), ("team/x", Scope::Admin)] {
        assert!(matches!(on(r, need), Err(AuthError::Forbidden(_))), "{r}");
    }
    assert!(matches!(
        on("org/x", Scope::Read),
        Err(AuthError::NotReached(_))
    ));
    // The CAS API needs one repository.
    assert!(matches!(
        authorize(
            &keys(),
            &headers,
            None,
            Scope::Read,
            false,
            Accepts::TransferTokens
        ),
        Err(AuthError::Forbidden(_))
    ));
    assert!(issue_rules(&keys(), &[], 60, &alice).is_err());
    let many: Vec<Rule> = (0..=MAX_RULES).map(|i| rule(&format!("o/r{i}"))).collect();
    assert!(issue_rules(&keys(), &many, 60, &alice).is_err());
    // Rules past the bound in a signed payload are refused, not trusted.
    let claims = Claims {
        rules: many.iter().map(Rule::spec).collect(),
        ..verify(&keys(), &token, now_secs()).unwrap()
    };
    let forged = seal(&keys(), &claims);
    assert!(verify(&keys(), &forged, now_secs())
        .unwrap()
        .rule_set()
        .is_err());
}
