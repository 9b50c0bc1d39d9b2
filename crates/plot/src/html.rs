//! HTML tables and standalone report pages.

use std::fmt::Write;
use std::path::Path;

use crate::fmt::{escape, is_numeric};
use crate::{BarChart, LineChart, Occupancy};

/// A table of text cells. Cells are escaped; cells that look like numbers
/// ([`is_numeric`]) are right-aligned, and so is the header of a column whose non-empty
/// cells all do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Column headers; may be empty (no header row).
    pub headers: Vec<String>,
    /// Rows of cells; shorter rows are padded with empty cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers and no rows.
    pub fn new(headers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(mut self, cells: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.push_row(cells);
        self
    }

    /// Adds a row in place.
    pub fn push_row(&mut self, cells: impl IntoIterator<Item = impl Into<String>>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The table as an HTML `<table>` element.
    pub fn to_html(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.headers.len()])
            .max()
            .unwrap_or(0);
        let numeric_col: Vec<bool> = (0..ncols)
            .map(|j| {
                let mut cells = self
                    .rows
                    .iter()
                    .filter_map(|r| r.get(j))
                    .filter(|s| !s.trim().is_empty())
                    .peekable();
                cells.peek().is_some() && cells.all(|s| is_numeric(s))
            })
            .collect();
        let mut out = String::from("<table>");
        if !self.headers.is_empty() {
            out.push_str("<thead><tr>");
            for (j, &numeric) in numeric_col.iter().enumerate() {
                let h = self.headers.get(j).map_or("", String::as_str);
                let class = if numeric { " class=\"num\"" } else { "" };
                let _ = write!(out, "<th{class}>{}</th>", escape(h));
            }
            out.push_str("</tr></thead>");
        }
        out.push_str("<tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for j in 0..ncols {
                let cell = row.get(j).map_or("", String::as_str);
                let class = if is_numeric(cell) {
                    " class=\"num\""
                } else {
                    ""
                };
                let _ = write!(out, "<td{class}>{}</td>", escape(cell));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        out
    }
}

/// A piece of a page section.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// Raw HTML, inserted as is.
    Html(String),
    /// An SVG element (from a chart's `to_svg`), in a figure box that scales it down to the
    /// page width.
    Svg(String),
    /// A table.
    Table(Table),
    /// Plain text, escaped, as a paragraph.
    Text(String),
    /// Preformatted text, escaped.
    Pre(String),
}

impl From<Table> for Block {
    fn from(t: Table) -> Self {
        Block::Table(t)
    }
}
/// A chart given to a page is drawn into it as SVG.
macro_rules! chart_blocks {
    ($($chart:ty),*) => {$(
        impl From<&$chart> for Block {
            fn from(c: &$chart) -> Self {
                Block::Svg(c.to_svg())
            }
        }
        impl From<$chart> for Block {
            fn from(c: $chart) -> Self {
                Block::Svg(c.to_svg())
            }
        }
    )*};
}
chart_blocks!(LineChart, BarChart, Occupancy);

impl Block {
    fn write(&self, out: &mut String) {
        match self {
            Block::Html(h) => out.push_str(h),
            Block::Svg(s) => {
                let _ = write!(out, "<figure class=\"chart\">{s}</figure>");
            }
            Block::Table(t) => {
                let _ = write!(out, "<div class=\"table\">{}</div>", t.to_html());
            }
            Block::Text(t) => {
                let _ = write!(out, "<p>{}</p>", escape(t));
            }
            Block::Pre(t) => {
                let _ = write!(out, "<pre>{}</pre>", escape(t));
            }
        }
    }
}

/// A titled section of a page.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// The `<h2>` text (escaped).
    pub heading: String,
    /// Its content, in order.
    pub blocks: Vec<Block>,
}

/// A standalone HTML5 report page: title, introduction, sections. Inline CSS only, no
/// script, no external resources; sections get anchors `#s1`, `#s2` …, listed in a table of
/// contents when there are three or more.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// The `<title>` and `<h1>` text (escaped).
    pub title: String,
    /// Raw HTML under the title.
    pub intro: String,
    /// The sections, in order.
    pub sections: Vec<Section>,
}

const CSS: &str = "body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;\
color:#222;line-height:1.45}\
h1{font-size:1.6em;margin-bottom:.3em}h2{font-size:1.25em;margin-top:2em;\
border-bottom:1px solid #ddd;padding-bottom:.2em}h3{font-size:1.05em}\
table{border-collapse:collapse;margin:.5em 0}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;font-size:90%}\
th{background:#f5f5f5}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
.table{overflow-x:auto}\
figure.chart{margin:1em 0}figure.chart svg{max-width:100%;height:auto;border:1px solid #eee}\
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:90%}\
nav.toc{font-size:95%}nav.toc ol{margin:.3em 0}\
.ok{color:#070}.bad{color:#b00;font-weight:bold}";

impl Page {
    /// A page with this title and nothing else.
    pub fn new(title: impl Into<String>) -> Self {
        Page {
            title: title.into(),
            intro: String::new(),
            sections: Vec::new(),
        }
    }

    /// Sets the introduction (raw HTML).
    pub fn intro(mut self, html: impl Into<String>) -> Self {
        self.intro = html.into();
        self
    }

    /// Adds a section.
    pub fn section(mut self, heading: impl Into<String>, blocks: Vec<Block>) -> Self {
        self.sections.push(Section {
            heading: heading.into(),
            blocks,
        });
        self
    }

    /// The complete HTML document.
    pub fn to_html(&self) -> String {
        let title = escape(&self.title);
        let mut out = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title><style>{CSS}</style></head><body><h1>{title}</h1>\n"
        );
        out.push_str(&self.intro);
        // Section `n` (from 1) is anchored at `#sn`.
        let headings: Vec<String> = self.sections.iter().map(|s| escape(&s.heading)).collect();
        if self.sections.len() >= 3 {
            out.push_str("<nav class=\"toc\"><ol>");
            for (n, h) in (1..).zip(&headings) {
                let _ = write!(out, "<li><a href=\"#s{n}\">{h}</a></li>");
            }
            out.push_str("</ol></nav>");
        }
        for ((n, h), s) in (1..).zip(&headings).zip(&self.sections) {
            let _ = write!(out, "\n<section id=\"s{n}\"><h2>{h}</h2>");
            for b in &s.blocks {
                b.write(&mut out);
            }
            out.push_str("</section>");
        }
        out.push_str("\n</body></html>\n");
        out
    }

    /// Writes [`to_html`](Page::to_html) to `path`, creating its parent directories.
    pub fn write(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.to_html())
    }
}
