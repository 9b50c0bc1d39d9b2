//! A level's seat demand over time (APF's `seatDemandIntegrator` and `seatDemandStats`):
//! seats in use plus requests queued, integrated between the scheduler's calls (it only
//! changes at a call), closed once per adjustment into the average, the standard deviation,
//! the high watermark and the smoothed demand that borrowing works from.

/// APF's `seatDemandSmoothingCoefficient`: the smoothed demand decays by this factor per
/// adjustment period (a half-life of 30 periods, 5 minutes at APF's 10 s).
pub const SMOOTHING: f64 = 0.977;

/// What one adjustment period showed of a level's seat demand.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DemandStats {
    /// Time-weighted average seats demanded (in use + queued) over the period.
    pub average: f64,
    /// Time-weighted standard deviation of it.
    pub deviation: f64,
    /// The most demanded at any instant of the period.
    pub high_watermark: f64,
    /// `max(average + deviation, a·previous + (1 − a)·(average + deviation))` with
    /// `a = SMOOTHING^(period length / adjustment period)`: what borrowing aims at.
    pub smoothed: f64,
}

/// The running integral of one level's demand.
#[derive(Clone, Debug)]
pub(crate) struct Demand {
    value: f64,
    /// When `value` last changed (−∞: not [`start`](Demand::start)ed).
    since: f64,
    /// When the current period began.
    start: f64,
    sum: f64,
    sum2: f64,
    high: f64,
    /// The last closed period.
    pub last: DemandStats,
}

impl Default for Demand {
    fn default() -> Self {
        Demand {
            value: 0.0,
            since: f64::NEG_INFINITY,
            start: f64::NEG_INFINITY,
            sum: 0.0,
            sum2: 0.0,
            high: 0.0,
            last: DemandStats::default(),
        }
    }
}

impl Demand {
    /// Observation begins at `now` (the scheduler's first call).
    pub fn start(&mut self, now: f64) {
        (self.since, self.start) = (now, now);
    }

    /// Whether [`start`](Demand::start) was called.
    pub fn started(&self) -> bool {
        self.since.is_finite()
    }

    /// Integrate up to `now`, which is at or after the last change (the scheduler's time
    /// never goes back).
    #[inline]
    fn accrue(&mut self, now: f64) {
        let dt = now - self.since;
        self.sum += self.value * dt;
        self.sum2 += self.value * self.value * dt;
        self.since = now;
    }

    /// The demand moved by `delta` seats at `now` (after [`start`](Demand::start)). Only a
    /// rise can raise the high watermark (`value` is a count: never NaN, and never above
    /// `high` after a change).
    #[inline]
    pub fn add(&mut self, delta: f64, now: f64) {
        self.accrue(now);
        self.value += delta;
        if delta > 0.0 && self.value > self.high {
            self.high = self.value;
        }
    }

    /// End the period at `now` (adjustment period `period`) and start the next one.
    pub fn close(&mut self, now: f64, period: f64) -> DemandStats {
        if !(now.is_finite() && self.since.is_finite()) {
            return self.last; // before the first call: nothing observed yet
        }
        self.accrue(now);
        let span = now - self.start;
        let mut stats = DemandStats {
            high_watermark: self.high,
            ..self.last
        };
        if span > 0.0 {
            let average = self.sum / span;
            let deviation = (self.sum2 / span - average * average).max(0.0).sqrt();
            let envelope = average + deviation;
            let a = SMOOTHING.powf(span / period);
            stats.average = average;
            stats.deviation = deviation;
            stats.smoothed = envelope.max(a * self.last.smoothed + (1.0 - a) * envelope);
        }
        (self.start, self.sum, self.sum2, self.high) = (now, 0.0, 0.0, self.value);
        self.last = stats;
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_between_changes() {
        let mut d = Demand::default();
        d.start(0.0);
        d.add(4.0, 2.0); // 0 on [0, 2), 4 on [2, 4), 2 on [4, 10)
        d.add(-2.0, 4.0);
        let s = d.close(10.0, 10.0);
        assert!((s.average - 2.0).abs() < 1e-12, "{s:?}"); // (0·2 + 4·2 + 2·6) / 10
        let var = (0.0 * 2.0 + 16.0 * 2.0 + 4.0 * 6.0) / 10.0 - 4.0;
        assert!((s.deviation - f64::sqrt(var)).abs() < 1e-12);
        assert_eq!(s.high_watermark, 4.0);
        assert!((s.smoothed - (2.0 + var.sqrt())).abs() < 1e-12); // the envelope, first time
                                                                  // The next period starts at the current value and decays the smoothed figure.
        let s2 = d.close(20.0, 10.0);
        assert_eq!(
            (s2.average, s2.deviation, s2.high_watermark),
            (2.0, 0.0, 2.0)
        );
        let expect = SMOOTHING * s.smoothed + (1.0 - SMOOTHING) * 2.0;
        assert!((s2.smoothed - expect).abs() < 1e-12);
    }

    #[test]
    fn changes_at_one_instant_integrate_nothing_but_raise_the_high_watermark() {
        let mut d = Demand::default();
        d.start(0.0);
        d.add(1.0, 0.0); // 1 on [0, 5)
        d.add(2.0, 5.0); // a peak of 3 at instant 5 only
        d.add(-2.0, 5.0);
        d.add(-1.0, 5.0); // 0 on [5, 10)
        let s = d.close(10.0, 10.0);
        assert_eq!((s.average, s.high_watermark), (0.5, 3.0));
        assert_eq!(s.deviation, 0.5); // sqrt(5/10 − 0.25)
    }

    #[test]
    fn a_closed_instant_keeps_the_smoothed_figure() {
        let mut d = Demand::default();
        assert_eq!(d.close(5.0, 10.0), DemandStats::default()); // not started
        d.start(5.0);
        d.add(3.0, 5.0);
        let s = d.close(5.0, 10.0);
        assert_eq!((s.high_watermark, s.smoothed), (3.0, 0.0));
        assert_eq!(d.close(f64::NEG_INFINITY, 10.0), s);
    }
}
