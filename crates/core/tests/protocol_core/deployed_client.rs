//! The xorb hf-xet 1.8 uploads: chunk records without a footer. The footer we rebuild must
//! be the one the reference's `reconstruct_xorb_with_footer` writes, byte for byte.

use git_xet_core::xorb::{is_footerless, rebuild_footer, validate_xorb};

use crate::common::*;

/// The URL hash hf-xet sent with `hf-xet-1.8.0-footerless.xorb`.
const HASH: &str = "e3e1e3efe343b3d97dcccd169411b3257070117916b6c077470f3bfe915de0ed";

#[test]
fn footerless_xorb_of_hf_xet_is_rebuilt_as_the_reference_rebuilds_it() {
    let sent = read_vector("hf-xet-1.8.0-footerless.xorb");
    let reference = read_vector("hf-xet-1.8.0-footerless.rebuilt.xorb");
    assert!(is_footerless(&sent));
    assert!(!is_footerless(&reference));

    let footer = rebuild_footer(&sent).unwrap();
    assert_eq!(footer.hash.to_hex(), HASH);
    assert_eq!(footer.num_chunks(), 3);
    let mut full = sent.clone();
    footer.write_to(&mut full);
    assert!(
        full == reference,
        "rebuilt xorb differs from the reference's"
    );
    assert_eq!(validate_xorb(&full).unwrap(), footer);
}

#[test]
fn footerless_xorb_with_a_damaged_chunk_is_refused_or_hashes_differently() {
    let sent = read_vector("hf-xet-1.8.0-footerless.xorb");
    // Chunk 1 is stored raw (no compression): a flipped byte still decodes, so only the
    // recomputed hashes can notice.
    let mut bad = sent.clone();
    bad[58709 + 8 + 100] ^= 1;
    let footer = rebuild_footer(&bad).unwrap();
    assert_ne!(footer.hash.to_hex(), HASH);
    // Chunk 0 is LZ4: a cut record no longer tiles the body and no longer decodes.
    assert!(!is_footerless(&sent[..58000]));
    assert!(rebuild_footer(&sent[..58000]).is_err());
}
