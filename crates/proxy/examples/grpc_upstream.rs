//! `cargo run --release -p fairlane-proxy --example grpc_upstream -- 127.0.0.1:8001`: the
//! gRPC unary echo server over h2c of `fairlane_proxy_testkit::grpc` (scripts/bench-proxy.sh's
//! gRPC rows).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = fairlane_proxy_testkit::addr_arg("127.0.0.1:8001")?;
    let (addr, _task) = fairlane_proxy_testkit::grpc::start(addr).await?;
    eprintln!("gRPC upstream listening on h2c://{addr}");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
