//! The catalog of §4–§5: TAMs of real systems, shipped with the crate (the files live in
//! the repository's `models/` directory and are embedded at build time).

use crate::error::ModelError;
use crate::model::Model;

/// One model of the catalog.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The file stem, e.g. `hbase` for `models/hbase.toml`.
    pub name: &'static str,
    /// Where in the paper the model comes from.
    pub figure: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

impl Entry {
    /// Parses the model (the catalog's tests make sure this succeeds).
    pub fn model(&self) -> Result<Model, ModelError> {
        Model::from_toml(self.text).map_err(|e| e.in_file(format!("models/{}.toml", self.name)))
    }
}

macro_rules! entry {
    ($name:literal, $figure:literal) => {
        Entry {
            name: $name,
            figure: $figure,
            text: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../models/",
                $name,
                ".toml"
            )),
        }
    };
}

/// Every model of the catalog, in the order of the paper.
pub const CATALOG: &[Entry] = &[
    entry!("hbase", "Fig. 2"),
    entry!("mongodb", "Fig. 3"),
    entry!("cassandra", "Fig. 4"),
    entry!("riak", "Fig. 5"),
    entry!("tamed-hbase", "Fig. 14"),
    entry!("muzzled-hbase", "Fig. 16"),
];

/// The catalog entry named `name` (file stem, e.g. `tamed-hbase`).
pub fn get(name: &str) -> Option<&'static Entry> {
    CATALOG.iter().find(|e| e.name == name)
}
