//! The rate-limited wiremock responders (`mock` feature), their header dialects and layers,
//! with Redis-counted layers on a real `redis-server` (`redis` feature).

#[path = "../support/mod.rs"]
mod support;

mod draft11;
mod mock_api;
mod mock_dialects;
mod mock_layers;
