//! `cargo run --release -p fairlane-proxy --example upstream -- 127.0.0.1:8000`: the small
//! delay server of `fairlane_proxy_testkit::upstream` (query `delay_ms`, `jitter_ms`, `cost`, `bytes`).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8000".into());
    let addr = addr.parse().map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
    })?;
    let s = fairlane_proxy_testkit::upstream::UpstreamServer::start(addr).await?;
    eprintln!("upstream listening on http://{}", s.addr());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
