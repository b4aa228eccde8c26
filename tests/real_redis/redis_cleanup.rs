//! A test process killed mid-run (a CI timeout, SIGKILL) leaves no `redis-server` running and
//! no server directory on disk.
//!
//! The test runs itself again as a child process (the victim), which starts a standalone
//! server and a 3-master cluster the way every Redis test does, reports their process ids,
//! ports and directory, and waits. The test kills the victim with SIGKILL, so no `Drop` runs,
//! then checks that every server is gone and the directory removed.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{RedisCluster, RedisServer, take_turn_blocking};

const TEST_NAME: &str = "a_killed_test_process_leaves_no_redis_server_and_no_files";
/// Set in the victim's environment: there, the test starts servers and waits to be killed.
const VICTIM: &str = "REQWEST_POLITE_CLEANUP_VICTIM";
/// The victim's longest life, should the test that spawned it be gone before killing it.
const VICTIM_LIFETIME: Duration = Duration::from_secs(120);
/// How long the kernel and the cleanup guard may take once the victim is dead: the signal is
/// immediate and the guard's `rm` takes milliseconds; a loaded machine gets a wide margin.
const CLEANUP_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn a_killed_test_process_leaves_no_redis_server_and_no_files() {
    let _turn = take_turn_blocking(module_path!());
    if std::env::var_os(VICTIM).is_some() {
        be_the_victim();
        return;
    }
    let mut victim = Command::new(std::env::current_exe().unwrap())
        .args([&test_path(), "--exact", "--nocapture", "--test-threads=1"])
        .env(VICTIM, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(victim.stdout.take().unwrap());
    let mut report = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        // libtest may have printed `test <name> ... ` on the same line
        if let Some((_, rest)) = line.split_once("VICTIM READY ") {
            report = Some(rest.to_string());
            break;
        }
    }
    let report = report.expect("the victim ended before starting its servers");
    let (root, servers) = parse_report(&report);
    assert_eq!(
        servers.len(),
        4,
        "one standalone server and 3 cluster nodes"
    );
    assert!(
        Path::new(&root).is_dir(),
        "{root} exists while the victim runs"
    );
    for &(pid, port) in &servers {
        assert!(
            is_running(pid),
            "redis-server {pid} runs while the victim runs"
        );
        assert!(answers(port), "port {port} answers while the victim runs");
    }

    // SIGKILL: nothing of the victim runs after this, no Drop, no handler.
    victim.kill().unwrap();
    victim.wait().unwrap();

    // Process ids, not ports: another test process on this machine may take a freed port.
    let deadline = Instant::now() + CLEANUP_LIMIT;
    loop {
        let running: Vec<u32> = servers
            .iter()
            .map(|&(pid, _)| pid)
            .filter(|&pid| is_running(pid))
            .collect();
        let files_left = Path::new(&root).exists();
        if running.is_empty() && !files_left {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{CLEANUP_LIMIT:?} after the victim was killed: redis-server still running \
             {running:?}, {root} still on disk: {files_left}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// The test's name as libtest knows it: the module path inside the test binary, then the name.
fn test_path() -> String {
    match module_path!().split_once("::") {
        Some((_binary, module)) => format!("{module}::{TEST_NAME}"),
        None => TEST_NAME.to_string(),
    }
}

/// Starts the servers, reports them on stdout, and waits to be killed.
fn be_the_victim() {
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let mut servers = vec![(server.pid().unwrap(), server.port())];
    let ports = cluster.urls().into_iter().map(|url| {
        url.rsplit(':')
            .next()
            .and_then(|port| port.parse::<u16>().ok())
            .unwrap()
    });
    servers.extend(cluster.pids().into_iter().zip(ports));
    let servers: Vec<String> = servers
        .iter()
        .map(|(pid, port)| format!("{pid}:{port}"))
        .collect();
    println!(
        "VICTIM READY {} {}",
        crate::support::temp_root().display(),
        servers.join(" ")
    );
    thread::sleep(VICTIM_LIFETIME);
    panic!("the victim was not killed within {VICTIM_LIFETIME:?}");
}

/// `<root> <pid>:<port>...` into the root and the (pid, port) pairs.
fn parse_report(report: &str) -> (String, Vec<(u32, u16)>) {
    let mut words = report.split(' ');
    let root = words.next().unwrap().to_string();
    let servers = words
        .map(|word| {
            let (pid, port) = word.split_once(':').unwrap();
            (pid.parse().unwrap(), port.parse().unwrap())
        })
        .collect();
    (root, servers)
}

/// Whether process `pid` exists and is not a zombie (a zombie has exited; it only waits for
/// whoever adopted it to read its status).
fn is_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: the state follows the last ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Whether something accepts connections on `port` of 127.0.0.1.
fn answers(port: u16) -> bool {
    TcpStream::connect_timeout(
        &(Ipv4Addr::LOCALHOST, port).into(),
        Duration::from_millis(200),
    )
    .is_ok()
}
