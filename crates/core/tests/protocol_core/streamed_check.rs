//! Checking a xorb as it arrives gives the verdict of the whole-body checks: the same footer
//! for every valid body, complete or footer-less, however it is split; a rejection for every
//! body they reject.

use git_xet_core::xorb::{
    is_footerless, rebuild_footer, validate_xorb, XorbBuilder, XorbFooter, XorbStreamCheck,
};
use git_xet_core::CoreError;
use proptest::prelude::*;

use crate::common::splitmix_bytes;
use crate::random::mixed_data;
use crate::xorbs::small_xorb;

/// What a server decided from the whole body: the footer, and whether the body carried it.
fn whole(body: &[u8]) -> Result<(XorbFooter, bool), CoreError> {
    if is_footerless(body) {
        rebuild_footer(body).map(|f| (f, false))
    } else {
        validate_xorb(body).map(|f| (f, true))
    }
}

fn streamed(body: &[u8], pieces: &[usize]) -> Result<(XorbFooter, bool), CoreError> {
    let mut check = XorbStreamCheck::new();
    let (mut pos, mut k) = (0, 0);
    while pos < body.len() {
        let end = (pos + pieces[k % pieces.len()].max(1)).min(body.len());
        check.push(&body[pos..end])?;
        pos = end;
        k += 1;
    }
    assert_eq!(check.received(), body.len() as u64);
    check.finish().map(|c| (c.footer, c.had_footer))
}

fn xorb_of(specs: &[(u64, usize, u8)]) -> Vec<u8> {
    let mut builder = XorbBuilder::new();
    for &(seed, len, kind) in specs {
        let chunk = match kind {
            0 => splitmix_bytes(len, seed),
            1 => mixed_data(seed, len),
            _ => (0..len)
                .map(|i| ((i as f32 / 97.0).cos().to_le_bytes())[i % 4])
                .collect(),
        };
        builder.push_data(&chunk).unwrap();
    }
    builder.finish().bytes
}

#[test]
fn byte_by_byte_and_whole_agree_on_both_forms() {
    let xorb = small_xorb();
    let footer = validate_xorb(&xorb).unwrap();
    for pieces in [vec![1], vec![xorb.len()], vec![7, 8, 9, 65_536]] {
        assert_eq!(streamed(&xorb, &pieces).unwrap(), (footer.clone(), true));
        let region = &xorb[..footer.data_len()];
        assert_eq!(streamed(region, &pieces).unwrap(), (footer.clone(), false));
    }
}

#[test]
fn rejections_name_what_is_wrong() {
    let xorb = small_xorb();
    let footer = validate_xorb(&xorb).unwrap();
    // Cut inside the second record: the stream ends in the middle of it.
    let cut = footer.chunk_ends[0] as usize + 100;
    let err = streamed(&xorb[..cut], &[4096]).unwrap_err();
    assert!(
        matches!(err, CoreError::Xorb(ref e) if matches!(**e,
        git_xet_core::error::XorbError::ChunkHeader { offset, .. } if offset == footer.chunk_ends[0] as usize)),
        "{err}"
    );
    // No bytes at all, and bytes that are no xorb.
    assert!(streamed(&[], &[1]).is_err());
    let err = streamed(&[b'{'; 300], &[10]).unwrap_err();
    assert!(matches!(err, CoreError::Xorb(_)), "{err}");
    // A footer-length of garbage after valid records: rejected, held no longer than a footer.
    let mut long = xorb[..footer.data_len()].to_vec();
    long.extend(std::iter::repeat_n(0xffu8, XorbFooter::MAX_TAIL + 1));
    assert!(streamed(&long, &[1 << 20]).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_split_gives_the_whole_body_verdict(
        specs in prop::collection::vec((any::<u64>(), 1usize..=131_072, 0u8..3), 1..10),
        pieces in prop::collection::vec(1usize..200_000, 1..8),
    ) {
        let xorb = xorb_of(&specs);
        let footer = validate_xorb(&xorb).unwrap();
        prop_assert_eq!(streamed(&xorb, &pieces).unwrap(), (footer.clone(), true));
        let region = &xorb[..footer.data_len()];
        prop_assert_eq!(streamed(region, &pieces).unwrap(), (footer, false));
    }

    #[test]
    fn damaged_bodies_get_the_whole_body_verdict(
        specs in prop::collection::vec((any::<u64>(), 1usize..=40_000, 0u8..3), 1..6),
        footerless in any::<bool>(),
        at in any::<prop::sample::Index>(),
        value in any::<u8>(),
        cut in any::<prop::sample::Index>(),
        damage in 0u8..3,
        pieces in prop::collection::vec(1usize..50_000, 1..5),
    ) {
        let mut body = xorb_of(&specs);
        if footerless {
            let footer = validate_xorb(&body).unwrap();
            body.truncate(footer.data_len());
        }
        match damage {
            0 => {
                let i = at.index(body.len());
                body[i] = value;
            }
            1 => body.truncate(cut.index(body.len())),
            _ => body.extend(std::iter::repeat_n(value, at.index(300) + 1)),
        }
        let expected = whole(&body);
        let got = streamed(&body, &pieces);
        prop_assert_eq!(got.is_ok(), expected.is_ok(), "whole: {:?} streamed: {:?}", expected, got);
        if let (Ok(got), Ok(expected)) = (got, expected) {
            prop_assert_eq!(got, expected);
        }
    }
}
