//! Civil dates from Unix time and back (H. Hinnant's algorithms, proleptic Gregorian, UTC),
//! for the `Date` header and certificate validity times.

/// The civil date `(year, month 1–12, day 1–31)` of `days` since 1970-01-01.
pub(crate) fn from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days from 1970-01-01 to the civil date `y-m-d`.
pub(crate) fn to_days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_known_dates() {
        assert_eq!(from_days(0), (1970, 1, 1));
        assert_eq!(from_days(-1), (1969, 12, 31));
        assert_eq!(from_days(11_016), (2000, 2, 29));
        assert_eq!(to_days(2038, 1, 19), 24_855);
        for d in (-800_000..800_000).step_by(997) {
            let (y, m, day) = from_days(d);
            assert_eq!(to_days(y, i64::from(m), i64::from(day)), d);
        }
    }
}
