//! `fairlane-proxy --config proxy.toml`: the proxy alone (the same as `fairlane proxy`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = match args.as_slice() {
        [flag, path] if flag == "--config" || flag == "-c" => path.clone(),
        [arg] if arg.starts_with("--config=") => arg["--config=".len()..].to_string(),
        _ => {
            eprintln!("usage: fairlane-proxy --config proxy.toml");
            return ExitCode::from(2);
        }
    };
    fairlane_proxy::cli::run(std::path::Path::new(&path))
}
