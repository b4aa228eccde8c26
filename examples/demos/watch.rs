//! What the demos show of the pacer while a job runs: the quota it paces to and an ETA in the
//! progress bar's message, from `Pacer::snapshots`, and the final snapshots as JSON.

use std::time::Duration;

use indicatif::ProgressBar;
use reqwest_polite::pacing::{KeySnapshot, Pacer, QuotaModel};

/// How many keys a demo looks at (its jobs use one or a few).
const KEYS: usize = 16;

/// The quota in a few words: `10/1s stated`, `~20/2.1s inferred`, `5/s configured`.
pub fn quota(model: &QuotaModel) -> String {
    match model {
        QuotaModel::Stated { quota, window } => match (quota, window) {
            (Some(quota), Some(window)) => format!("{quota}/{} stated", seconds(*window)),
            (Some(quota), None) => format!("{quota} per window, stated"),
            _ => "stated (what is left only)".to_owned(),
        },
        QuotaModel::Inferred {
            quota,
            window,
            settled,
        } => {
            let how = if *settled { "inferred" } else { "inferring" };
            match window {
                Some(window) => format!("~{quota}/{} {how}", seconds(*window)),
                None => format!("~{quota} per window, {how}"),
            }
        }
        QuotaModel::Configured { rate } => format!("{:.1}/s configured", rate.units_per_second()),
        _ => "quota unknown yet".to_owned(),
    }
}

fn seconds(duration: Duration) -> String {
    let s = duration.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s:.2}s")
    }
}

/// The busiest key of `pacers` (the most queued and in flight), if any holds one.
pub fn busiest(pacers: &[Pacer]) -> Option<KeySnapshot> {
    pacers
        .iter()
        .flat_map(|pacer| pacer.snapshots(KEYS))
        .max_by_key(|s| (s.queued + s.in_flight, s.throttled))
}

/// The progress message: the busiest key's quota and, for the `left` requests still to go,
/// the ETA at that quota's pace.
pub fn message(pacers: &[Pacer], left: u64) -> String {
    let Some(snapshot) = busiest(pacers) else {
        return String::new();
    };
    let eta = match snapshot.eta(left) {
        Some(eta) => format!("ETA {:.1} s", eta.as_secs_f64()),
        None => "ETA ?".to_owned(),
    };
    let paused = match snapshot.opens_in {
        Some(wait) => format!(", paused {:.1} s", wait.as_secs_f64()),
        None => String::new(),
    };
    format!("quota {}{paused}, {eta}", quota(&snapshot.model))
}

/// Updates `progress`'s message every 250 ms until dropped (aborts its task then).
pub struct Ticker(tokio::task::JoinHandle<()>);

impl Ticker {
    pub fn start(progress: ProgressBar, pacers: Vec<Pacer>, total: u64) -> Ticker {
        Ticker(tokio::spawn(async move {
            loop {
                let left = total.saturating_sub(progress.position());
                progress.set_message(message(&pacers, left));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }))
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn millis(duration: Option<Duration>) -> serde_json::Value {
    duration.map_or(serde_json::Value::Null, |d| {
        serde_json::json!(d.as_millis() as u64)
    })
}

/// One snapshot as JSON (times in ms).
pub fn to_json(snapshot: &KeySnapshot) -> serde_json::Value {
    let model = match snapshot.model {
        QuotaModel::Stated { quota, window } => serde_json::json!({
            "kind": "stated", "quota": quota, "window_ms": millis(window),
        }),
        QuotaModel::Inferred {
            quota,
            window,
            settled,
        } => serde_json::json!({
            "kind": "inferred", "quota": quota, "window_ms": millis(window), "settled": settled,
        }),
        QuotaModel::Configured { rate } => serde_json::json!({
            "kind": "configured", "per_second": rate.units_per_second(),
        }),
        _ => serde_json::json!({ "kind": "unknown" }),
    };
    serde_json::json!({
        "key": snapshot.key,
        "model": model,
        "probing": snapshot.probing,
        "remaining": snapshot.remaining,
        "reset_in_ms": millis(snapshot.reset_in),
        "opens_in_ms": millis(snapshot.opens_in),
        "queued": snapshot.queued,
        "in_flight": snapshot.in_flight,
        "throttled": snapshot.throttled,
        "probes": snapshot.probes,
    })
}

/// Every key's snapshot of `pacers`, as a JSON array.
pub fn snapshots_json(pacers: &[Pacer]) -> serde_json::Value {
    pacers
        .iter()
        .flat_map(|pacer| pacer.snapshots(KEYS))
        .map(|snapshot| to_json(&snapshot))
        .collect()
}
