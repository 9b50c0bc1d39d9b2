//! Standard output for the subcommands: a reader that went away (`fairlane simulate SPEC
//! --json | head`, `| true`) ends the program quietly with status 0, as with other
//! command-line tools, instead of a panic.

use std::io::{self, Write};
use std::process::ExitCode;

/// Write through `f` to standard output and flush. `None` when all was written; else the
/// status to exit with: 0 when the reader closed the pipe, 1 (with a message) on another
/// error.
pub fn print(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Option<ExitCode> {
    let stdout = io::stdout();
    let mut lock = stdout.lock();
    match f(&mut lock).and_then(|()| lock.flush()) {
        Ok(()) => None,
        Err(e) => Some(closed(&e)),
    }
}

/// The status for a failed write to standard output: quiet success when the reader closed
/// the pipe, else a message and failure.
pub fn closed(e: &io::Error) -> ExitCode {
    if e.kind() == io::ErrorKind::BrokenPipe {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: writing to standard output: {e}");
        ExitCode::FAILURE
    }
}
