//! (module: in progress)
