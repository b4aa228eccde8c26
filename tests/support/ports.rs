//! Free loopback ports. Tests run in parallel threads, and test binaries beside other
//! processes, so a port is found by binding port 0 (the kernel picks an unused one) and callers
//! retry when a server loses the race.

use std::net::{Ipv4Addr, TcpListener};

/// A port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot bind any loopback port")
}

/// A port free together with `port + 10000`, which Redis Cluster uses for its bus.
pub(crate) fn free_cluster_port() -> u16 {
    for _ in 0..200 {
        let port = free_port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_ok() {
            return port;
        }
    }
    panic!("no loopback port P with P + 10000 also free after 200 tries")
}

/// A loopback port with nothing listening on it: bound, then released at once. Another process
/// could take it meanwhile, which no test here does on purpose; a connection to it is refused.
pub fn closed_port() -> u16 {
    free_port()
}

/// A loopback listener that never answers: the kernel accepts connections into its backlog,
/// nothing reads them. A client's connect succeeds and its command times out.
pub fn silent_listener() -> TcpListener {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("cannot bind any loopback port")
}
