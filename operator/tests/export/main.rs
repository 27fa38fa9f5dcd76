//! Exporting records and evidence: S3 (moto), GitHub releases (a fake API on loopback),
//! a claim mounted by the result pod, OME's S3 example run locally, and a warehouse kept
//! in S3.
//!
//! One test binary per area (each links the whole operator once, not once per file);
//! every file below is one module, as it was one binary before.

#[path = "../support/mod.rs"]
mod support;

mod export_claim_operator;
mod export_github;
mod export_s3;
mod ome_local_s3;
#[cfg(feature = "warehouse")]
mod warehouse_s3;
