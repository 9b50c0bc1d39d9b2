//! The token settings' checks (`upstream.cost`, `cost.*_token_weight`,
//! `tenant[i].*_token_weight`); what they drive is `fairlane_proxy::tokens`.

use fairlane_core::TokenCost;

use super::{ConfigError, ProxyConfig};

/// `[upstream] cost`'s one value.
pub const OPENAI_USAGE: &str = "openai-usage";

/// Checks of the token settings, called from [`ProxyConfig::validate`]: `upstream.cost`,
/// `cost.*_token_weight`, `tenant[i].*_token_weight`.
pub(crate) fn check(config: &ProxyConfig) -> Result<(), ConfigError> {
    if let Some(c) = &config.upstream.cost {
        if c != OPENAI_USAGE {
            let why = format!("{c:?} is not a cost source; the one known is {OPENAI_USAGE:?}");
            return Err(ConfigError::new("upstream.cost", why));
        }
        if config.upstream.cost_header.is_some() {
            return Err(ConfigError::new(
                "upstream.cost",
                "cannot be combined with upstream.cost_header: the cost comes from one of them",
            ));
        }
    }
    let c = &config.cost;
    weight("cost.input_token_weight", c.input_token_weight)?;
    weight("cost.output_token_weight", c.output_token_weight)?;
    for (i, t) in config.tenants.iter().enumerate() {
        if let Some(w) = t.input_token_weight {
            weight(&format!("tenant[{i}].input_token_weight"), w)?;
        }
        if let Some(w) = t.output_token_weight {
            weight(&format!("tenant[{i}].output_token_weight"), w)?;
        }
    }
    Ok(())
}

fn weight(field: &str, w: f64) -> Result<(), ConfigError> {
    if w.is_finite() && w > 0.0 && w <= TokenCost::MAX_WEIGHT {
        return Ok(());
    }
    let max = TokenCost::MAX_WEIGHT;
    Err(ConfigError::new(
        field,
        format!("must be finite, > 0 and ≤ {max:e}, got {w}"),
    ))
}
