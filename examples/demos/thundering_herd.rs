//! The seed's fourth experiment: 20 clients (separate, as 20 processes would be) all get a 429
//! with `Retry-After: 2` at the same instant; when do their retries reach the server?
//!
//! Four variants run at once, each against its own wiremock server whose responder answers
//! each client's first request with the 429 and later ones with 200, and records the instant
//! every request arrived (server-side). Three variants are the retry layer alone, differing
//! only in its jitter; the fourth is `reqwest_polite::client()` as it comes (retry layer and
//! pacer).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::retry::RetryPolicy;
use reqwest_polite::time::Jitter;
use tokio::sync::Barrier;
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// How much later than its wait a retry may reach the server: the 429's way back to the
/// client, the retry's way to the server, and tokio's millisecond timer, on a loaded machine.
pub const TRANSPORT_TOLERANCE: Duration = Duration::from_millis(20);

/// Which client the herd is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Retry layer without jitter: every client waits exactly what the server said.
    NoJitter,
    /// Retry layer with ±10% (the default jitter).
    Symmetric,
    /// Retry layer with `NotBefore(0.1)`: the same 20% width, all after the server's time.
    NotBefore,
    /// `reqwest_polite::client()`, unchanged: retry layer and pacer with their defaults.
    DefaultClient,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::NoJitter,
        Variant::Symmetric,
        Variant::NotBefore,
        Variant::DefaultClient,
    ];

    /// The name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::NoJitter => "retry, no jitter",
            Variant::Symmetric => "retry, ±10%",
            Variant::NotBefore => "retry, +0–20%",
            Variant::DefaultClient => "default client",
        }
    }

    /// The name in the JSON line.
    pub fn id(self) -> &'static str {
        match self {
            Variant::NoJitter => "none",
            Variant::Symmetric => "symmetric_10",
            Variant::NotBefore => "not_before_10",
            Variant::DefaultClient => "default_client",
        }
    }

    /// Where its retries should land, as fractions of Retry-After after the 429: the jitter's
    /// bounds (the default client's retry layer has ±10%).
    pub fn bounds(self) -> (f64, f64) {
        self.jitter().unwrap_or_default().bounds()
    }

    /// The jitter the retry layer is built with (`None` for the default client).
    fn jitter(self) -> Option<Jitter> {
        match self {
            Variant::NoJitter => Some(Jitter::None),
            Variant::Symmetric => Some(Jitter::Symmetric(0.1)),
            Variant::NotBefore => Some(Jitter::NotBefore(0.1)),
            Variant::DefaultClient => None,
        }
    }

    /// A fresh client (its own retry budget, RNG and pacer). The three jitter variants are
    /// the retry layer alone, so that `seed` makes them reproducible; with the pacer in the
    /// stack the same jitter is drawn once by the pacer (from the thread's RNG) and waited by
    /// the retry layer, which is what the default client's row shows. The default client is
    /// never changed.
    pub fn client(self, seed: Option<u64>) -> ClientWithMiddleware {
        let Some(jitter) = self.jitter() else {
            return reqwest_polite::client();
        };
        let mut policy = RetryPolicy::new().with_jitter(jitter);
        if let Some(seed) = seed {
            policy = policy.with_seed(seed);
        }
        PoliteClientBuilder::new()
            .retry_policy(policy)
            .no_pacing()
            .build()
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    client: usize,
    at: Instant,
}

/// Answers `GET /herd/<client>`: the first request of each client gets 429 with
/// `Retry-After`, later ones 200; every arrival is recorded.
struct HerdResponder {
    retry_after_s: u64,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Respond for HerdResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let at = Instant::now();
        let Some(client) = request
            .url
            .path()
            .strip_prefix("/herd/")
            .and_then(|id| id.parse().ok())
        else {
            return ResponseTemplate::new(404);
        };
        let mut arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
        let first = !arrivals.iter().any(|a| a.client == client);
        arrivals.push(Arrival { client, at });
        if first {
            ResponseTemplate::new(429).insert_header("retry-after", self.retry_after_s.to_string())
        } else {
            ResponseTemplate::new(200)
        }
    }
}

/// What one variant's herd did, in server time.
#[derive(Debug, Clone)]
pub struct Herd {
    pub variant: Variant,
    pub retry_after: Duration,
    /// Per client: when its retry arrived, after the herd's first 429 (`None`: no retry came).
    pub retry_at: Vec<Option<Duration>>,
    /// Per client: when its retry arrived after its own 429.
    pub after_own_429: Vec<Option<Duration>>,
    /// The time between the first and the last 429 of the herd.
    pub refusal_spread: Duration,
    /// Clients whose request did not end in a 200.
    pub failed: usize,
}

impl Herd {
    fn retries(&self) -> impl Iterator<Item = Duration> + '_ {
        self.retry_at.iter().flatten().copied()
    }

    fn waits(&self) -> impl Iterator<Item = Duration> + '_ {
        self.after_own_429.iter().flatten().copied()
    }

    /// Clients whose retry reached the server.
    pub fn retried(&self) -> usize {
        self.retries().count()
    }

    /// From the first retry's arrival to the last's.
    pub fn spread(&self) -> Duration {
        match (self.retries().min(), self.retries().max()) {
            (Some(first), Some(last)) => last - first,
            _ => Duration::ZERO,
        }
    }

    /// The shortest time from a client's 429 to its retry.
    pub fn shortest_wait(&self) -> Option<Duration> {
        self.waits().min()
    }

    /// The longest time from a client's 429 to its retry.
    pub fn longest_wait(&self) -> Option<Duration> {
        self.waits().max()
    }

    /// Retries that came back sooner than the server said.
    pub fn early(&self) -> usize {
        self.waits().filter(|&w| w < self.retry_after).count()
    }

    /// How many retries arrived in each `width` bin after the herd's first 429, from bin 0.
    pub fn bins(&self, width: Duration) -> Vec<usize> {
        let mut bins = Vec::new();
        for at in self.retries() {
            let bin = (at.as_nanos() / width.as_nanos()) as usize;
            if bins.len() <= bin {
                bins.resize(bin + 1, 0);
            }
            bins[bin] += 1;
        }
        bins
    }

    /// The fullest 10 ms bin.
    pub fn busiest_10ms(&self) -> usize {
        self.bins(Duration::from_millis(10))
            .into_iter()
            .max()
            .unwrap_or(0)
    }

    /// Whether every retry came, each within `[low, high]` × Retry-After of its 429 (plus the
    /// transport tolerance above).
    pub fn all_within(&self, low: f64, high: f64) -> bool {
        let low = self.retry_after.mul_f64(low);
        let high = self.retry_after.mul_f64(high) + TRANSPORT_TOLERANCE;
        self.retried() == self.retry_at.len() && self.waits().all(|w| w >= low && w <= high)
    }

    /// The seed's pass criteria for this variant (20 clients, `Retry-After: 2`): without
    /// jitter, all within 20 ms of each other; with it, all within the jitter's bounds after
    /// the 429, spread over at least 200 ms, no 10 ms bin above 4. `None` for other sizes.
    pub fn seed_criteria(&self) -> Option<Result<(), String>> {
        if self.retry_at.len() != 20 || self.retry_after != Duration::from_secs(2) {
            return None;
        }
        let mut failures = Vec::new();
        if self.retried() != self.retry_at.len() || self.failed > 0 {
            failures.push(format!(
                "{} of {} retried, {} failed",
                self.retried(),
                self.retry_at.len(),
                self.failed
            ));
        }
        let spread = self.spread();
        match self.variant {
            Variant::NoJitter => {
                if spread > Duration::from_millis(20) {
                    failures.push(format!("spread {} ms > 20 ms", spread.as_millis()));
                }
            }
            Variant::Symmetric | Variant::NotBefore | Variant::DefaultClient => {
                let (low, high) = self.variant.bounds();
                if !self.all_within(low, high) {
                    failures.push(format!(
                        "not all within [{:.1}, {:.1}] s",
                        2.0 * low,
                        2.0 * high
                    ));
                }
                if spread < Duration::from_millis(200) {
                    failures.push(format!("spread {} ms < 200 ms", spread.as_millis()));
                }
                let busiest = self.busiest_10ms();
                if busiest > 4 {
                    failures.push(format!("{busiest} in one 10 ms bin > 4"));
                }
            }
        }
        Some(if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        })
    }
}

/// Runs one variant: `clients` fresh clients, each warmed up (connection open), released
/// together by a barrier to send `GET /herd/<i>`, get the 429, and retry.
pub async fn run(
    variant: Variant,
    clients: usize,
    retry_after: Duration,
    seed: Option<u64>,
) -> Result<Herd, String> {
    let server = MockServer::start().await;
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("GET"))
        .and(path_regex("^/warmup/"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex("^/herd/"))
        .respond_with(HerdResponder {
            retry_after_s: retry_after.as_secs(),
            arrivals: arrivals.clone(),
        })
        .mount(&server)
        .await;

    let barrier = Arc::new(Barrier::new(clients));
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let client = variant.client(seed.map(|s| s.wrapping_add(i as u64)));
            let (barrier, base) = (barrier.clone(), server.uri());
            tokio::spawn(async move {
                // Open the connection first, so the herd's 429s go out within a millisecond.
                let warm = client.get(format!("{base}/warmup/{i}")).send().await;
                barrier.wait().await;
                warm.map_err(|e| e.to_string())?;
                let response = client.get(format!("{base}/herd/{i}")).send().await;
                Ok::<u16, String>(response.map_err(|e| e.to_string())?.status().as_u16())
            })
        })
        .collect();
    let mut failed = 0;
    for task in tasks {
        match task.await.map_err(|e| e.to_string())? {
            Ok(200) => {}
            Ok(_) | Err(_) => failed += 1,
        }
    }

    let arrivals = arrivals
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut refused_at = HashMap::new();
    let mut retried_at = HashMap::new();
    for arrival in &arrivals {
        match refused_at.entry(arrival.client) {
            Entry::Vacant(first) => {
                first.insert(arrival.at);
            }
            Entry::Occupied(_) => {
                retried_at.entry(arrival.client).or_insert(arrival.at);
            }
        }
    }
    let first_429 = refused_at
        .values()
        .min()
        .copied()
        .ok_or_else(|| format!("{}: no request reached the server", variant.name()))?;
    let last_429 = refused_at.values().max().copied().unwrap_or(first_429);
    let retry_at = (0..clients)
        .map(|i| retried_at.get(&i).map(|&at| at - first_429))
        .collect();
    let after_own_429 = (0..clients)
        .map(|i| Some(*retried_at.get(&i)? - *refused_at.get(&i)?))
        .collect();
    Ok(Herd {
        variant,
        retry_after,
        retry_at,
        after_own_429,
        refusal_spread: last_429 - first_429,
        failed,
    })
}

/// Every variant at once (each its own server and clients), in [`Variant::ALL`] order.
pub async fn run_all(
    clients: usize,
    retry_after: Duration,
    seed: Option<u64>,
) -> Result<Vec<Herd>, String> {
    let runs = Variant::ALL
        .iter()
        .map(|&variant| run(variant, clients, retry_after, seed));
    futures::future::join_all(runs).await.into_iter().collect()
}

/// The time span a plot or histogram of `herds` should cover, in whole `step`s: from the
/// earlier of 0.75 × Retry-After and the first retry, to the later of 1.3 × Retry-After and
/// the last retry.
pub fn span(herds: &[Herd], step: Duration) -> (Duration, Duration) {
    let retry_after = herds
        .first()
        .map_or(Duration::from_secs(2), |h| h.retry_after);
    let first = herds.iter().flat_map(Herd::retries).min();
    let last = herds.iter().flat_map(Herd::retries).max();
    let from = first.map_or(retry_after.mul_f64(0.75), |f| {
        f.min(retry_after.mul_f64(0.75))
    });
    let to = last.map_or(retry_after.mul_f64(1.3), |l| {
        l.max(retry_after.mul_f64(1.3))
    });
    let step_nanos = step.as_nanos();
    let floor =
        |d: Duration| Duration::from_nanos(((d.as_nanos() / step_nanos) * step_nanos) as u64);
    (floor(from), floor(to) + step)
}

/// Writes one histogram panel per herd (10 ms bins) into an SVG file at `path`, with the
/// server's Retry-After marked and the band the jitter should fill shaded.
pub fn write_svg(herds: &[Herd], path: &Path) -> Result<(), String> {
    use plotters::prelude::*;

    let bin = Duration::from_millis(10);
    let (from, to) = span(herds, Duration::from_millis(100));
    let tallest = herds
        .iter()
        .map(Herd::busiest_10ms)
        .max()
        .unwrap_or(1)
        .max(5) as u32;
    let root = SVGBackend::new(path, (900, 190 * herds.len().max(1) as u32)).into_drawing_area();
    let fail = |e: DrawingAreaErrorKind<_>| format!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(fail)?;
    for (panel, herd) in root.split_evenly((herds.len(), 1)).iter().zip(herds) {
        let retry_after = herd.retry_after.as_secs_f64();
        let caption = format!(
            "{}: spread {} ms, busiest 10 ms bin {}, {} before {} s",
            herd.variant.name(),
            herd.spread().as_millis(),
            herd.busiest_10ms(),
            herd.early(),
            herd.retry_after.as_secs()
        );
        let mut chart = ChartBuilder::on(panel)
            .caption(caption, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(36)
            .build_cartesian_2d(from.as_secs_f64()..to.as_secs_f64(), 0u32..tallest + 1)
            .map_err(fail)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("seconds after the herd's 429")
            .y_desc("retries")
            .x_label_formatter(&|x| format!("{x:.1}"))
            .draw()
            .map_err(fail)?;
        // The band the jitter should fill, then the server's time itself.
        let (low, high) = herd.variant.bounds();
        if high > low {
            let band = [(retry_after * low, 0), (retry_after * high, tallest + 1)];
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    band,
                    RGBColor(255, 236, 200).filled(),
                )))
                .map_err(fail)?;
        }
        chart
            .draw_series(LineSeries::new(
                [(retry_after, 0), (retry_after, tallest + 1)],
                RED.stroke_width(2),
            ))
            .map_err(fail)?;
        let bars = herd
            .bins(bin)
            .into_iter()
            .enumerate()
            .filter(|&(_, count)| count > 0)
            .map(|(index, count)| {
                let left = bin.as_secs_f64() * index as f64;
                Rectangle::new(
                    [(left, 0), (left + bin.as_secs_f64(), count as u32)],
                    BLUE.filled(),
                )
            });
        chart.draw_series(bars).map_err(fail)?;
    }
    root.present().map_err(fail)?;
    Ok(())
}
