use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::ports::free_cluster_port;
use super::process::{RedisProcess, require};

const NODES: usize = 3;
/// How long the nodes may take to agree on `cluster_state:ok`.
const CONVERGE_LIMIT: Duration = Duration::from_secs(15);

/// A Redis Cluster of 3 masters (no replicas) on free loopback ports, killed on drop.
///
/// Panics (never skips) when `redis-server` or `redis-cli` is missing.
pub struct RedisCluster {
    nodes: Vec<RedisProcess>,
}

impl RedisCluster {
    /// Starts 3 nodes, joins them with `redis-cli --cluster create`, and waits until every node
    /// reports `cluster_state:ok`. Retries from scratch if a port was lost to another process.
    pub fn start() -> RedisCluster {
        require("redis-server");
        require("redis-cli");
        let mut failures = Vec::new();
        for _ in 0..3 {
            match Self::try_start() {
                Ok(cluster) => return cluster,
                Err(err) => failures.push(err),
            }
        }
        panic!("redis cluster did not start after 3 tries: {failures:#?}")
    }

    fn try_start() -> Result<RedisCluster, String> {
        let mut nodes = Vec::with_capacity(NODES);
        for _ in 0..NODES {
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ];
            nodes.push(RedisProcess::start(free_cluster_port(), &args)?);
        }
        let cluster = RedisCluster { nodes };
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .map_err(|err| format!("cannot run redis-cli: {err}"))?;
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        cluster.wait_until_ok()?;
        Ok(cluster)
    }

    fn wait_until_ok(&self) -> Result<(), String> {
        let deadline = Instant::now() + CONVERGE_LIMIT;
        while Instant::now() < deadline {
            if self.nodes.iter().all(|node| cluster_state_ok(&node.url())) {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "cluster_state not ok on every node within {CONVERGE_LIMIT:?}"
        ))
    }

    /// The nodes' URLs, `redis://127.0.0.1:<port>`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisProcess::url).collect()
    }

    /// The nodes' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(RedisProcess::pid).collect()
    }

    /// A synchronous connection to each node, for inspecting state in tests.
    pub fn node_connections(&self) -> Vec<redis::Connection> {
        self.urls()
            .iter()
            .map(|url| {
                redis::Client::open(url.as_str())
                    .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(1)))
                    .unwrap_or_else(|err| panic!("cannot connect to {url}: {err}"))
            })
            .collect()
    }
}

fn cluster_state_ok(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
        return false;
    };
    redis::cmd("CLUSTER")
        .arg("INFO")
        .query::<String>(&mut connection)
        .is_ok_and(|info| info.contains("cluster_state:ok"))
}
