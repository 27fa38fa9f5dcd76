//! The Kubernetes API surface of perfsweep's resources: object names and labels, the
//! status every kind reports, field errors, Volcano's PodGroup, the rules shared by every
//! CRD, the checks the API server makes of CRDs and of objects against them, and the
//! kube-perftest API group accepted beside perfsweep's.

pub mod compat;
pub mod crd_rules;
pub mod labels;
pub mod names;
pub mod schema;
pub mod status;
pub mod structural;
pub mod validation;
pub mod volcano;
