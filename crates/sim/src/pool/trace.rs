//! Trace files: CSV rows `time,tenant,class,cost` (seconds, name, class name, cost units).
//! A header row naming those columns is optional; blank lines and lines starting with `#`
//! are skipped. Rows may come in any order; each tenant's rows are replayed in time order.

use std::collections::BTreeMap;
use std::path::Path;

/// One request of a trace, for one tenant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceRow {
    /// Arrival time in seconds (after speed-up).
    pub time: f64,
    /// Class id.
    pub class: u32,
    /// Cost units.
    pub cost: f64,
}

/// Rows by tenant name: `(time, class, cost)`, sorted by time.
pub type Rows = BTreeMap<String, Vec<(f64, String, f64)>>;

/// Read a trace file. Errors name the file and line.
pub(crate) fn load(path: &Path) -> Result<Rows, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
    parse(&text).map_err(|(line, m)| format!("{}:{line}: {m}", path.display()))
}

/// Parse trace text. Errors are `(line number, message)`.
pub fn parse(text: &str) -> Result<Rows, (usize, String)> {
    let mut rows: Rows = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        if cols.len() != 4 {
            return Err((
                n,
                format!(
                    "expected 4 columns time,tenant,class,cost, got {}",
                    cols.len()
                ),
            ));
        }
        if rows.is_empty() && cols[0].eq_ignore_ascii_case("time") {
            continue; // the header
        }
        let time: f64 = cols[0]
            .parse()
            .map_err(|_| (n, format!("time {:?} is not a number", cols[0])))?;
        if !(time.is_finite() && time >= 0.0) {
            return Err((n, format!("time must be a finite number ≥ 0, got {time}")));
        }
        if cols[1].is_empty() {
            return Err((n, "tenant is empty".into()));
        }
        if cols[2].is_empty() {
            return Err((n, "class is empty".into()));
        }
        let cost: f64 = cols[3]
            .parse()
            .map_err(|_| (n, format!("cost {:?} is not a number", cols[3])))?;
        if !(cost.is_finite() && cost > 0.0) {
            return Err((n, format!("cost must be a finite number > 0, got {cost}")));
        }
        rows.entry(cols[1].to_string())
            .or_default()
            .push((time, cols[2].to_string(), cost));
    }
    if rows.is_empty() {
        return Err((0, "the trace has no rows".into()));
    }
    for r in rows.values_mut() {
        r.sort_by(|a, b| a.0.total_cmp(&b.0)); // stable: equal times keep file order
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_sorts() {
        let rows =
            parse("time,tenant,class,cost\n# c\n0.5,a,get,10\n0.1,a,put,3\n\n0.2,b,get,1e3\n")
                .unwrap();
        assert_eq!(
            rows["a"],
            vec![(0.1, "put".into(), 3.0), (0.5, "get".into(), 10.0)]
        );
        assert_eq!(rows["b"], vec![(0.2, "get".into(), 1000.0)]);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(parse("0.1,a,get,10\nx,a,get,1\n").unwrap_err().0, 2);
        assert!(parse("0.1,a,get\n").unwrap_err().1.contains("4 columns"));
        assert!(parse("0.1,a,get,-1\n").unwrap_err().1.contains("cost"));
        assert!(parse("# only\n").is_err());
    }
}
