//! The seam for where a request's charged cost comes from when it is not its slot time
//! ([`CostSource`]): the response header's value, or token usage read from the body.

/// Where the cost charged for a request comes from, when not from its slot time: it sees
/// each data frame of the response as it passes, may report the cost so far while the
/// response streams, and names the cost when the slot is freed. The unit is the gate's:
/// seconds, or weighted tokens under `upstream.cost = "openai-usage"` (`fairlane_proxy::tokens`).
pub(crate) trait CostSource: Send {
    /// A data frame of the response went by.
    fn data(&mut self, _chunk: &[u8]) {}
    /// The cumulative cost so far, if it grew since last asked (the scheduler's `progress`).
    fn used(&mut self) -> Option<f64> {
        None
    }
    /// The upstream body ended (it was not cut short by the client going away).
    fn ended(&mut self) {}
    /// The cost to charge (NaN or negative: unreadable; bounded by `[cost]`).
    fn cost(&mut self) -> f64;
}

/// `upstream.cost_header`: the cost the upstream reported in a response header (ms).
pub(crate) struct HeaderCost(pub f64);

impl CostSource for HeaderCost {
    fn cost(&mut self) -> f64 {
        self.0
    }
}
