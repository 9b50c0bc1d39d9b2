//! `cargo run --release -p fairlane-proxy --example upstream -- 127.0.0.1:8000`: the small
//! delay server of `fairlane_proxy_testkit::upstream` (query `delay_ms`, `jitter_ms`, `cost`, `bytes`).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = fairlane_proxy_testkit::addr_arg("127.0.0.1:8000")?;
    let s = fairlane_proxy_testkit::upstream::UpstreamServer::start(addr).await?;
    eprintln!("upstream listening on http://{}", s.addr());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
