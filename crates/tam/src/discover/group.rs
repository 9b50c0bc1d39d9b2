//! Grouping threads into stages: by an annotation file (name patterns → stage names), or,
//! without one, by their names with digits and numeric suffixes folded.

use super::procfs::ThreadSample;
use super::DiscoverError;
use regex::Regex;
use toml::{Table, Value};

/// One annotation: threads whose names match every given pattern belong to `stage`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The stage name to use in the model.
    pub stage: String,
    /// Regex on the process's name (`comm` of its main thread).
    pub comm: Option<Regex>,
    /// Regex on the process title (`argv[0]` as the process shows it now).
    pub title: Option<Regex>,
    /// Regex on the thread's own name.
    pub thread: Option<Regex>,
}

/// An annotation file: rules tried in file order, first match wins. Threads that match
/// no rule belong to the NULL stage (reported when busy, left out of the model).
#[derive(Debug, Clone, Default)]
pub struct Annotations {
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

impl Annotations {
    /// Parses an annotation file; `file` names it in errors.
    ///
    /// ```toml
    /// [[stage]]
    /// name = "Backend"                  # the stage name in the model
    /// title = '^postgres: \S+ \S+ '     # regex on the process title, and/or
    /// comm = '^postgres$'               # regex on the process name, and/or
    /// thread = '^io_thd_'               # regex on the thread name
    /// ```
    pub fn parse(text: &str, file: &str) -> Result<Annotations, DiscoverError> {
        let bad = |msg: String| DiscoverError::Annotations(format!("{file}: {msg}"));
        let top: Table = text
            .parse()
            .map_err(|e: toml::de::Error| bad(format!("invalid TOML: {}", e.message())))?;
        for key in top.keys() {
            if key != "stage" {
                return Err(bad(format!(
                    "unknown top-level key `{key}`; allowed: stage"
                )));
            }
        }
        let Some(items) = top.get("stage") else {
            return Ok(Annotations::default());
        };
        let Value::Array(items) = items else {
            return Err(bad("`stage` must be [[stage]] tables".into()));
        };
        let mut rules = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let who = format!("stage #{}", i + 1);
            let Value::Table(t) = item else {
                return Err(bad(format!("{who}: expected a [[stage]] table")));
            };
            for key in t.keys() {
                if !["name", "comm", "title", "thread"].contains(&key.as_str()) {
                    return Err(bad(format!(
                        "{who}: unknown key `{key}`; allowed: name, comm, title, thread"
                    )));
                }
            }
            let stage = match t.get("name") {
                Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
                _ => {
                    return Err(bad(format!(
                        "{who}: field `name` must be a non-empty string"
                    )))
                }
            };
            let pattern = |key: &str| -> Result<Option<Regex>, DiscoverError> {
                match t.get(key) {
                    None => Ok(None),
                    Some(Value::String(s)) => Regex::new(s).map(Some).map_err(|e| {
                        bad(format!(
                            "stage `{stage}`: field `{key}`: invalid regex: {e}"
                        ))
                    }),
                    Some(_) => Err(bad(format!(
                        "stage `{stage}`: field `{key}`: expected a regex string"
                    ))),
                }
            };
            let rule = Rule {
                comm: pattern("comm")?,
                title: pattern("title")?,
                thread: pattern("thread")?,
                stage: stage.clone(),
            };
            if rule.comm.is_none() && rule.title.is_none() && rule.thread.is_none() {
                return Err(bad(format!(
                    "stage `{stage}`: give at least one of comm, title, thread"
                )));
            }
            rules.push(rule);
        }
        Ok(Annotations { rules })
    }

    /// Whether there are any rules (without rules, every thread is grouped by name).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The stage of a thread: the first matching rule, `None` (the NULL stage) when rules
    /// exist and none matches, or the folded name when there are no rules.
    pub fn stage_of(&self, t: &ThreadSample, process_comm: &str) -> Option<String> {
        if self.rules.is_empty() {
            return Some(folded_name(t, process_comm));
        }
        let ok = |re: &Option<Regex>, s: &str| re.as_ref().is_none_or(|re| re.is_match(s));
        self.rules
            .iter()
            .find(|r| ok(&r.comm, process_comm) && ok(&r.title, &t.title) && ok(&r.thread, &t.comm))
            .map(|r| r.stage.clone())
    }
}

/// Replaces every run of digits with `*`: `io_thd_1`, `io_thd_2` → `io_thd_*`.
pub fn fold_digits(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('*');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// The default stage name of a thread. A process's main thread is named by the process
/// title when the process rewrote its title but not its thread name (PostgreSQL's
/// `postgres: checkpointer`); the title is cut before its first word with a digit, so
/// per-connection details (`127.0.0.1(5432)`, PIDs, states after them) fold away. Every
/// other thread is named by its own name with digits folded.
pub fn folded_name(t: &ThreadSample, process_comm: &str) -> String {
    if t.tid == t.pid && !t.title.is_empty() {
        let first = t.title.split_whitespace().next().unwrap_or("");
        let base = first.rsplit('/').next().unwrap_or(first);
        let exe15: String = t.exe.chars().take(15).collect();
        let renamed_thread = !t.exe.is_empty() && process_comm != exe15;
        if !renamed_thread && base != t.comm && base != exe15 && base != t.exe {
            let words: Vec<&str> = t
                .title
                .split_whitespace()
                .take_while(|w| !w.chars().any(|c| c.is_ascii_digit()))
                .collect();
            if !words.is_empty() {
                return words.join(" ");
            }
        }
    }
    fold_digits(&t.comm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(pid: u32, tid: u32, comm: &str, title: &str, exe: &str) -> ThreadSample {
        ThreadSample {
            pid,
            tid,
            start: 0,
            comm: comm.into(),
            title: title.into(),
            exe: exe.into(),
            state: 'S',
            wchan: String::new(),
            cpu: 0,
            read_bytes: 0,
            write_bytes: 0,
            rchar: 0,
            wchar: 0,
            socket: None,
        }
    }

    #[test]
    fn digits_and_numeric_suffixes_fold() {
        assert_eq!(fold_digits("io_thd_1"), "io_thd_*");
        assert_eq!(fold_digits("io_thd_12"), "io_thd_*");
        assert_eq!(fold_digits("worker-3/7"), "worker-*/*");
        assert_eq!(fold_digits("flusher"), "flusher");
    }

    /// `(pid, tid, comm, title, exe, process comm, folded name)`, with why.
    const FOLDED: &[(u32, u32, &str, &str, &str, &str, &str)] = &[
        // A rewritten title names the process and drops the connection details.
        (
            9,
            9,
            "postgres",
            "postgres: bench pgbench 127.0.0.1(40122) idle",
            "postgres",
            "postgres",
            "postgres: bench pgbench",
        ),
        (
            8,
            8,
            "postgres",
            "postgres: checkpointer",
            "postgres",
            "postgres",
            "postgres: checkpointer",
        ),
        // The postmaster keeps its command line: named by its process name.
        (
            7,
            7,
            "postgres",
            "/usr/lib/postgresql/15/bin/postgres",
            "postgres",
            "postgres",
            "postgres",
        ),
        // A program that named its main thread keeps that name.
        (
            5,
            5,
            "acceptor",
            "/tmp/t/server-1a2b serve",
            "server-1a2b",
            "acceptor",
            "acceptor",
        ),
        // Another thread: its own name, digits folded.
        (
            5,
            6,
            "io_thd_2",
            "redis-server 127.0.0.1:6379",
            "redis-server",
            "redis-server",
            "io_thd_*",
        ),
    ];

    #[test]
    fn rewritten_titles_name_processes_and_fold_connection_details() {
        for &(pid, tid, comm, title, exe, process, want) in FOLDED {
            let t = thread(pid, tid, comm, title, exe);
            assert_eq!(folded_name(&t, process), want, "{title}");
        }
    }

    #[test]
    fn annotations_match_in_order_and_leave_the_rest_in_the_null_stage() {
        let a = Annotations::parse(
            "[[stage]]\nname = \"Backend\"\ntitle = '^postgres: \\S+ \\S+ '\n\
             [[stage]]\nname = \"IO\"\nthread = '^io_thd_'\n",
            "a.toml",
        )
        .unwrap();
        let b = thread(
            9,
            9,
            "postgres",
            "postgres: u db 127.0.0.1(1) idle",
            "postgres",
        );
        assert_eq!(a.stage_of(&b, "postgres").as_deref(), Some("Backend"));
        let io = thread(5, 6, "io_thd_1", "redis-server", "redis-server");
        assert_eq!(a.stage_of(&io, "redis-server").as_deref(), Some("IO"));
        let other = thread(5, 7, "bio_aof", "redis-server", "redis-server");
        assert_eq!(a.stage_of(&other, "redis-server"), None);
    }

    #[test]
    fn bad_annotations_name_the_file_and_field() {
        let e = Annotations::parse("[[stage]]\nname = \"X\"\nthread = '('\n", "a.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.toml") && e.contains("`thread`") && e.contains("regex"),
            "{e}"
        );
        let e = Annotations::parse("[[stage]]\nname = \"X\"\n", "b.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.toml") && e.contains("at least one"), "{e}");
    }
}
