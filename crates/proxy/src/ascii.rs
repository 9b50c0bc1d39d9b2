//! Case-insensitive comparison of header names and tokens against a lowercase pattern,
//! eight bytes at a time.

const LOW7: u64 = u64::from_ne_bytes([0x7f; 8]);
const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
/// `0x80 - b'a'` in each byte: a byte of at least `a` gets its high bit.
const FROM_A: u64 = u64::from_ne_bytes([0x80 - b'a'; 8]);
/// `0x80 - (b'z' + 1)` in each byte: a byte past `z` gets its high bit.
const PAST_Z: u64 = u64::from_ne_bytes([0x80 - b'z' - 1; 8]);

/// Whether `a` equals `lower` ignoring ASCII case: the same answer as
/// `a.eq_ignore_ascii_case(lower)` for any `lower` without uppercase ASCII letters (a header
/// name, a lowercase token).
#[inline]
pub(crate) fn eq_lower(a: &[u8], lower: &[u8]) -> bool {
    debug_assert!(!lower.iter().any(u8::is_ascii_uppercase));
    let n = a.len();
    if n != lower.len() {
        return false;
    }
    if n < 4 {
        return a.eq_ignore_ascii_case(lower);
    }
    if n < 8 {
        // Two overlapping four-byte words, side by side.
        let w = |s: &[u8]| u64::from(word4(s, 0)) | u64::from(word4(s, n - 4)) << 32;
        return eq_word(w(a), w(lower));
    }
    let mut i = 0;
    while i + 8 <= n {
        if !eq_word(word8(a, i), word8(lower, i)) {
            return false;
        }
        i += 8;
    }
    // The last eight bytes, overlapping those compared already.
    i == n || eq_word(word8(a, n - 8), word8(lower, n - 8))
}

/// Eight bytes of `a` against eight of a pattern: where the pattern has a lowercase letter,
/// the byte's case bit is ignored; elsewhere the bytes are equal.
#[inline]
fn eq_word(a: u64, lower: u64) -> bool {
    let x = lower & LOW7;
    let letters = x.wrapping_add(FROM_A) & !x.wrapping_add(PAST_Z) & !lower & HIGH;
    (a | letters >> 2) == lower
}

#[inline]
fn word8(s: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]))
}

#[inline]
fn word4(s: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(s[at..at + 4].try_into().unwrap_or([0; 4]))
}

#[cfg(test)]
mod tests {
    use super::eq_lower;

    #[test]
    fn every_byte_pair_as_std() {
        // Each pattern byte (no uppercase letter) against each byte, at each place of
        // patterns of every length from 1 to 20.
        for len in 1..=20usize {
            for at in 0..len {
                for p in (0..=255u8).filter(|p| !p.is_ascii_uppercase()) {
                    let mut lower = vec![b'k'; len];
                    lower[at] = p;
                    for b in 0..=255u8 {
                        let mut a = lower.clone();
                        a[at] = b;
                        assert_eq!(
                            eq_lower(&a, &lower),
                            a.eq_ignore_ascii_case(&lower),
                            "{a:?} {lower:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn names_and_lengths() {
        assert!(eq_lower(b"Authorization", b"authorization"));
        assert!(eq_lower(b"CONTENT-LENGTH", b"content-length"));
        assert!(!eq_lower(b"Content-Lengti", b"content-length"));
        assert!(!eq_lower(b"content-length", b"content-lengt"));
        assert!(eq_lower(b"Bearer", b"bearer"));
        assert!(!eq_lower(b"Bearer\r", b"bearer-"));
        assert!(!eq_lower(b"Be\x01rer", b"be!rer"));
        assert!(eq_lower(b"", b""));
        assert!(eq_lower(b"TE", b"te"));
    }
}
