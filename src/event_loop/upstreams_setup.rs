//! Building the groups at start (ARCHITECTURE.md §13): IP literals as
//! they are, host names resolved once here (a name that does not resolve
//! stops the start unless its group says `resolve = "lazy"`), and the list
//! of names the resolver thread keeps looking up.
//!
//! What it must not know: HTTP, connections.

use std::io;
use std::net::SocketAddr;

use crate::config::Config;
use crate::upstreams::Groups;
use crate::upstreams::dns::{Name, Resolver, lookup};
use crate::upstreams::spec::Resolve;

/// The groups of `config` and the host names to re-resolve.
///
/// Errors: `InvalidInput` naming the first host that does not resolve in
/// a group with `resolve = "start"`.
pub(super) fn build_groups(
    config: &Config,
    resolver: &dyn Resolver,
) -> io::Result<(Groups, Vec<Name>)> {
    let mut names = Vec::new();
    let mut failed: Option<String> = None;
    let groups = Groups::new(&config.upstream, &config.route, |g, s| {
        let Some(group) = config.upstream.get(g) else {
            return Vec::new();
        };
        let Some(server) = group.servers.get_ref().get(s) else {
            return Vec::new();
        };
        if let Some(ip) = server.ip() {
            return vec![SocketAddr::new(ip, server.port)];
        }
        let mut name = Name {
            group: g,
            origin: s,
            host: server.host.clone(),
            port: server.port,
            interval: group.resolve_interval,
            last: Vec::new(),
        };
        let addrs = lookup(resolver, &mut name).map(|u| u.addrs);
        if addrs.is_none() && group.resolve == Resolve::Start && failed.is_none() {
            failed = Some(format!(
                "upstream host {:?} (group {:?}) does not resolve",
                server.host,
                group.name.get_ref()
            ));
        }
        names.push(name);
        addrs.unwrap_or_default()
    });
    if let Some(msg) = failed {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
    }
    Ok((groups, names))
}
