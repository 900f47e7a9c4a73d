//! A filter that chooses the upstream group itself: requests carrying
//! `X-Canary: 1` go to the group `canary`, the rest follow the configured
//! routes (ARCHITECTURE.md §10, §13).
//!
//!     cargo run --example route_filter -- 127.0.0.1:8001 127.0.0.1:8002

use sluice::{Config, Filter, GroupSpec, RequestHead, Server, ServerSpec, Target};

struct Canary;

impl Filter for Canary {
    fn upstream_peer(&self, req: &RequestHead) -> Target {
        if req.headers.get("x-canary") == Some(b"1") {
            Target::group("canary")
        } else {
            Target::Routes
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let stable: ServerSpec = args.next().unwrap_or("127.0.0.1:8001".into()).parse()?;
    let canary: ServerSpec = args.next().unwrap_or("127.0.0.1:8002".into()).parse()?;
    let config = Config {
        upstream: vec![
            GroupSpec::new("stable", vec![stable]),
            GroupSpec::new("canary", vec![canary]),
        ],
        ..Config::default()
    };
    let server = Server::bind(config, Canary)?;
    eprintln!("listening on {}", server.local_addr());
    server.run()?;
    Ok(())
}
