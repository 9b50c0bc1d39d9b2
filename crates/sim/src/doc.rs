//! A spec as the simulator reads it: the file's TOML document, parsed once, with the file's
//! name for errors and the directory its relative paths start from. Every kind of spec is
//! read through it, changed through it (`--set PATH=VALUE`, Python's `set=`, each point of a
//! `[[sweep]]`), and turned into its typed sections through it ([`Doc::typed`]).
//!
//! A field path is dotted: `duration`, `server.workers`, `tenant.small.count`. A segment
//! after an array of tables picks the element whose `name` is that segment, or, when no
//! element has that name and the segment is a number, the element at that index
//! (`simulation.request.get.path.1.io_bytes`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::SpecError;

/// The largest number of tenants one `[[tenant]]` group expands to, in every kind.
pub const MAX_GROUP: usize = 100_000;

/// Serde defaults the kinds' sections share.
pub(crate) mod default {
    /// The seed of a spec that names none.
    pub fn seed() -> u64 {
        1
    }
    /// One, as a weight, share or rate multiplier.
    pub fn one() -> f64 {
        1.0
    }
    /// One, as a count.
    pub fn one_count() -> usize {
        1
    }
}

/// A parsed spec document.
#[derive(Clone, Debug)]
pub struct Doc {
    /// Where it came from (for errors).
    pub file: String,
    /// The directory its relative paths (traces, architectures) start from.
    pub dir: PathBuf,
    /// The document.
    pub value: toml::Value,
}

/// `[[sweep]]`: a labelled point that sets some fields of the spec; every kind of spec has
/// them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepPoint {
    /// Label in reports.
    pub label: String,
    /// Field path → value, e.g. `"tenant.small.count" = 50`.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
}

impl Doc {
    /// Read and parse a spec file.
    pub fn load(path: &Path) -> Result<Doc, SpecError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SpecError {
            file: file.clone(),
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Doc::parse(&text, &file, dir)
    }

    /// Parse spec text; `file` names it in errors and `dir` anchors relative paths.
    pub fn parse(text: &str, file: &str, dir: PathBuf) -> Result<Doc, SpecError> {
        let value = toml::from_str(text).map_err(|e| SpecError {
            file: file.to_string(),
            field: String::new(),
            message: format!("not valid TOML: {}", e.message().trim()),
        })?;
        Ok(Doc {
            file: file.to_string(),
            dir,
            value,
        })
    }

    /// An error in this file.
    pub fn err(&self, field: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.file.clone(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// The value at a field path, if the document has it.
    pub fn get(&self, path: &str) -> Option<&toml::Value> {
        let segs: Vec<&str> = path.split('.').collect();
        let mut cur = &self.value;
        let mut i = 0;
        while i < segs.len() {
            cur = cur.as_table()?.get(segs[i])?;
            if let (toml::Value::Array(items), Some(next)) = (cur, segs.get(i + 1)) {
                cur = &items[element(items, next)?];
                i += 1;
            }
            i += 1;
        }
        Some(cur)
    }

    /// Set a field; the error names the path.
    pub fn set(&mut self, path: &str, value: toml::Value) -> Result<(), SpecError> {
        set_path(&mut self.value, path, value).map_err(|message| self.err(path, message))
    }

    /// The document as the typed spec `T` (serde); errors name the field's path.
    pub fn typed<T: DeserializeOwned>(&self) -> Result<T, SpecError> {
        serde_path_to_error::deserialize::<_, T>(self.value.clone()).map_err(|e| SpecError {
            file: self.file.clone(),
            field: e.path().to_string(),
            message: e.inner().message().to_string(),
        })
    }

    /// The document of one point: `keys` (the points' own sections, `sweep`, `suite`)
    /// removed and `set` applied. Errors name the point.
    pub fn point<'a>(
        &self,
        label: &str,
        set: impl IntoIterator<Item = (&'a String, &'a toml::Value)>,
        keys: &[&str],
    ) -> Result<Doc, SpecError> {
        let mut doc = self.clone();
        if let Some(t) = doc.value.as_table_mut() {
            for k in keys {
                t.remove(*k);
            }
        }
        for (path, value) in set {
            set_path(&mut doc.value, path, value.clone())
                .map_err(|message| self.err(format!("set.{path:?} (point {label:?})"), message))?;
        }
        Ok(doc)
    }
}

/// The index of the element of `items` that `seg` names: by `name`, else by position.
fn element(items: &[toml::Value], seg: &str) -> Option<usize> {
    items
        .iter()
        .position(|v| v.get("name").and_then(toml::Value::as_str) == Some(seg))
        .or_else(|| seg.parse::<usize>().ok().filter(|&i| i < items.len()))
}

/// Set a dotted field path in a TOML document (see the module documentation). Missing
/// tables on the way are created.
pub(crate) fn set_path(
    doc: &mut toml::Value,
    path: &str,
    value: toml::Value,
) -> Result<(), String> {
    let segs: Vec<&str> = path.split('.').collect();
    let mut cur = doc;
    let mut i = 0;
    while i < segs.len() {
        let seg = segs[i];
        let last = i + 1 == segs.len();
        let table = cur
            .as_table_mut()
            .ok_or_else(|| format!("`{}` is not a table", segs[..i].join(".")))?;
        if last {
            table.insert(seg.to_string(), value);
            return Ok(());
        }
        let next = table
            .entry(seg.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
        if let toml::Value::Array(items) = next {
            let name = segs[i + 1];
            match element(items, name) {
                Some(k) => {
                    cur = &mut items[k];
                    i += 2;
                    if i == segs.len() {
                        return Err(format!("`{path}` names a whole {seg} entry, not a field"));
                    }
                    continue;
                }
                None => return Err(format!("no `{seg}` entry is named {name:?}")),
            }
        }
        cur = next;
        i += 1;
    }
    Err("empty path".into())
}

/// `PATH=VALUE` as written after `--set`: the path, and the value read as a TOML value
/// (`200`, `0.5`, `true`, `"text"`, `["wfq", "2dfq"]`, `{ kind = "constant", value = 1 }`),
/// or, when it is not one, as a string (`--set server.model=blackbox`).
pub fn assignment(text: &str) -> Result<(String, toml::Value), String> {
    let (path, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected PATH=VALUE, got {text:?}"))?;
    let path = path.trim();
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(format!(
            "expected a dotted field path before `=`, got {path:?}"
        ));
    }
    let value = value.trim();
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"));
    Ok((
        path.to_string(),
        parsed.unwrap_or_else(|| toml::Value::String(value.to_string())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Doc {
        Doc::parse(text, "t.toml", ".".into()).unwrap()
    }

    #[test]
    fn paths_pick_array_elements_by_name_then_by_index() {
        let mut d = doc(
            "[[tenant]]\nname = \"a\"\ncount = 1\n[[tenant]]\nname = \"1\"\ncount = 2\n\
             [[tenant]]\nname = \"c\"\ncount = 3\n",
        );
        assert_eq!(d.get("tenant.a.count"), Some(&toml::Value::Integer(1)));
        // A name wins over an index: "1" is the second element's name.
        assert_eq!(d.get("tenant.1.count"), Some(&toml::Value::Integer(2)));
        assert_eq!(d.get("tenant.2.count"), Some(&toml::Value::Integer(3)));
        assert_eq!(d.get("tenant.9.count"), None);
        d.set("tenant.2.count", toml::Value::Integer(7)).unwrap();
        assert_eq!(d.get("tenant.c.count"), Some(&toml::Value::Integer(7)));
        let e = d
            .set("tenant.x.count", toml::Value::Integer(1))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.toml: tenant.x.count: no `tenant` entry is named \"x\""
        );
        let e = d.set("tenant.a", toml::Value::Integer(1)).unwrap_err();
        assert!(e.message.contains("names a whole tenant entry"), "{e}");
        d.set("server.rate", toml::Value::Float(2.0)).unwrap();
        assert_eq!(d.get("server.rate"), Some(&toml::Value::Float(2.0)));
    }

    #[test]
    fn assignments_read_toml_values_or_else_strings() {
        let a = |s: &str| assignment(s).unwrap();
        assert_eq!(a("x.y=200"), ("x.y".into(), toml::Value::Integer(200)));
        assert_eq!(a("x = 0.5"), ("x".into(), toml::Value::Float(0.5)));
        assert_eq!(a("m=blackbox").1, toml::Value::String("blackbox".into()));
        assert_eq!(a("m=\"wfq\"").1, toml::Value::String("wfq".into()));
        assert_eq!(
            a("s=[\"wfq\", \"2dfq\"]").1.as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(
            a("c={ kind = \"constant\", value = 1 }").1["value"].as_integer(),
            Some(1)
        );
        assert!(assignment("novalue").is_err());
        assert!(assignment("=3").is_err());
        assert!(assignment("a..b=3").is_err());
    }
}
