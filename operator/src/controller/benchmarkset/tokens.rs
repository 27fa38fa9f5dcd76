//! Launch tokens in batches: before the set controller creates several children at once,
//! it writes their tokens into one Secret of the set's, a key per child
//! ([`launch::batch_secret`]), and the children's pods read their own keys of it. One
//! create per batch instead of one launch Secret per child.
//!
//! Only this process's word counts that a child's token is in a batch ([`SetTokens`]): the
//! set controller records each child's key before it creates the child, and the benchmark
//! controller uses it only for a benchmark of that namespace, kind and name whose
//! controlling owner is that set. Anything else — a benchmark that merely names the set
//! as its owner, a child reconciled after a restart, a batch whose create failed — makes
//! its own launch Secret as before. A token is still each child's own: a forged child
//! that found a key would find only the one named after itself.
//!
//! A batch is deleted once all of its children have ended (one request per batch); one
//! this process did not make, or whose children never end, goes with the set.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use perfsweep_benchmarks::render::launch::{self, TokenSource};
use perfsweep_benchmarks::set::BenchmarkSet;

use crate::controller::{Context, plumbing};

/// A child's identity as its set created it.
type ChildKey = (String, &'static str, String);

/// The batches this process wrote, and where each child recorded in them reads its token.
#[derive(Default)]
pub struct SetTokens {
    inner: Mutex<Recorded>,
}

#[derive(Default)]
struct Recorded {
    /// (namespace, kind, child name) → (the set's uid, where the child reads its token).
    children: HashMap<ChildKey, (String, TokenSource)>,
    /// By set uid: its batches not yet deleted.
    batches: HashMap<String, Vec<Batch>>,
}

struct Batch {
    namespace: String,
    kind: &'static str,
    secret: String,
    /// The batch's uid as created: its delete is conditional on it.
    uid: String,
    children: Vec<String>,
}

/// A batch written: the children whose key it holds (recorded, to be created now).
pub struct Written {
    pub children: Vec<String>,
}

impl SetTokens {
    /// Where a benchmark reads its token when its set wrote it into a batch: the
    /// benchmark's controlling owner is the set that recorded a key for this namespace,
    /// kind and name.
    pub fn source_for(
        &self,
        namespace: &str,
        kind: &'static str,
        name: &str,
        owners: &[OwnerReference],
    ) -> Option<TokenSource> {
        let owner = super::peers::controlling_set(owners)?;
        let key = (namespace.to_owned(), kind, name.to_owned());
        let recorded = self.lock();
        let (set_uid, source) = recorded.children.get(&key)?;
        (*set_uid == owner.uid).then(|| source.clone())
    }

    /// Records the children of a batch just created: those not recorded already (in an
    /// earlier batch: they keep their key, they may have pods reading it) are the batch's.
    fn record(&self, set_uid: &str, mut batch: Batch) -> Vec<String> {
        let mut recorded = self.lock();
        batch.children.retain(|child| {
            let key = (batch.namespace.clone(), batch.kind, child.clone());
            if recorded.children.contains_key(&key) {
                return false;
            }
            let source = launch::batch_source(&batch.secret, child);
            recorded.children.insert(key, (set_uid.to_owned(), source));
            true
        });
        let fresh = batch.children.clone();
        recorded
            .batches
            .entry(set_uid.to_owned())
            .or_default()
            .push(batch);
        fresh
    }

    /// A child whose create did not make it (an error, or one of that name there
    /// already): it is not the child the key was written for, nor one its batch waits on.
    pub fn unrecord(&self, namespace: &str, kind: &'static str, name: &str) {
        let key = (namespace.to_owned(), kind, name.to_owned());
        let mut recorded = self.lock();
        let Some((set_uid, source)) = recorded.children.remove(&key) else {
            return;
        };
        for batch in recorded.batches.get_mut(&set_uid).into_iter().flatten() {
            if batch.secret == source.secret {
                batch.children.retain(|child| child != name);
            }
        }
    }

    /// The set's batches whose children have all ended (`ended` answers for a child's
    /// name), taken out with their children's keys: to delete.
    fn take_ended(
        &self,
        set_uid: &str,
        ended: impl Fn(&str) -> bool,
    ) -> Vec<(String, String, String)> {
        let mut recorded = self.lock();
        let Some(batches) = recorded.batches.remove(set_uid) else {
            return Vec::new();
        };
        let (done, going): (Vec<Batch>, Vec<Batch>) = batches
            .into_iter()
            .partition(|batch| batch.children.iter().all(|child| ended(child)));
        if !going.is_empty() {
            recorded.batches.insert(set_uid.to_owned(), going);
        }
        done.into_iter()
            .map(|batch| {
                for child in &batch.children {
                    let key = (batch.namespace.clone(), batch.kind, child.clone());
                    recorded.children.remove(&key);
                }
                (batch.namespace, batch.secret, batch.uid)
            })
            .collect()
    }

    /// Whether the set has batches not yet deleted.
    pub fn has_batches(&self, set_uid: &str) -> bool {
        self.lock().batches.contains_key(set_uid)
    }

    /// Forgets a set that is gone (its batches go with it, through their owner).
    pub fn forget(&self, set_uid: &str) {
        let mut recorded = self.lock();
        recorded.batches.remove(set_uid);
        recorded.children.retain(|_, (uid, _)| uid != set_uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Writes one batch of tokens for `children` (at most [`launch::MAX_BATCH_TOKENS`]) of
/// `kind` and records them: the children to create reading it. `None` when the batch could
/// not be had — the random source failed, or its create did (a forbidden verb, a failed
/// request): the children then make their own Secrets, and the set goes on.
pub async fn write_batch(
    set: &BenchmarkSet,
    namespace: &str,
    kind: &'static str,
    children: &[String],
    ctx: &Context,
) -> Option<Written> {
    let set_uid = set.uid()?;
    let set_name = set.name_any();
    let made = (|| {
        let suffix = crate::token::random()?;
        let tokens = children
            .iter()
            .map(|child| Ok((child.clone(), crate::token::random()?)))
            .collect::<Result<BTreeMap<_, _>, crate::token::RandomUnavailable>>()?;
        Ok::<_, crate::token::RandomUnavailable>((suffix, tokens))
    })();
    let (suffix, tokens) = match made {
        Ok(made) => made,
        Err(error) => {
            tracing::warn!(set = %format!("{namespace}/{set_name}"), %error,
                "no batch of launch tokens: each child makes its own");
            return None;
        }
    };
    let name = launch::batch_secret_name(&set_name, &suffix[..8]);
    let secret = launch::batch_secret(name.clone(), &set_name, namespace, &set_uid, tokens);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let created = match api.create(&PostParams::default(), &secret).await {
        Ok(created) => created,
        Err(error) => {
            tracing::warn!(set = %format!("{namespace}/{set_name}"), secret = %name, %error,
                "no batch of launch tokens: each child makes its own");
            return None;
        }
    };
    let batch = Batch {
        namespace: namespace.to_owned(),
        kind,
        secret: name,
        uid: created.uid().unwrap_or_default(),
        children: children.to_vec(),
    };
    let children = ctx.set_tokens.record(&set_uid, batch);
    Some(Written { children })
}

/// Deletes the set's batches whose children have all ended (`ended`), each conditional
/// on its uid. A failed delete is only logged: the batch goes with the set.
pub async fn delete_ended(set: &BenchmarkSet, ctx: &Context, ended: impl Fn(&str) -> bool) {
    let Some(set_uid) = set.uid() else {
        return;
    };
    for (namespace, name, uid) in ctx.set_tokens.take_ended(&set_uid, ended) {
        let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
        if let Err(error) = plumbing::delete_if_present(&api, &name, &uid).await {
            tracing::warn!(secret = %format!("{namespace}/{name}"), %error,
                "deleting an ended batch of launch tokens; it goes with its set");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::peers::tests::owner;
    use super::*;

    fn batch(secret: &str, children: &[&str]) -> Batch {
        Batch {
            namespace: "ns".to_owned(),
            kind: "IPerf",
            secret: secret.to_owned(),
            uid: format!("{secret}-uid"),
            children: children.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    #[test]
    fn only_the_recorded_child_of_its_controlling_set_reads_a_batch() {
        let tokens = SetTokens::default();
        let fresh = tokens.record("set-a", batch("a-launch-1", &["a-1", "a-2"]));
        assert_eq!(fresh, ["a-1", "a-2"]);
        let set_a = [owner("BenchmarkSet", "set-a", Some(true))];
        let source = |ns: &str, kind: &'static str, name: &str, owners: &[OwnerReference]| {
            tokens.source_for(ns, kind, name, owners)
        };
        assert_eq!(
            source("ns", "IPerf", "a-1", &set_a),
            Some(launch::batch_source("a-launch-1", "a-1"))
        );
        // Another namespace, another kind, a name never recorded, another set's uid, a
        // set named but not controlling: each makes its own Secret.
        assert_eq!(source("other", "IPerf", "a-1", &set_a), None);
        assert_eq!(source("ns", "Fio", "a-1", &set_a), None);
        assert_eq!(source("ns", "IPerf", "a-3", &set_a), None);
        assert_eq!(
            source(
                "ns",
                "IPerf",
                "a-1",
                &[owner("BenchmarkSet", "set-b", Some(true))]
            ),
            None
        );
        assert_eq!(
            source(
                "ns",
                "IPerf",
                "a-1",
                &[owner("BenchmarkSet", "set-a", None)]
            ),
            None
        );
        assert_eq!(source("ns", "IPerf", "a-1", &[]), None);
        // A child whose create failed is not the one the key was written for.
        tokens.unrecord("ns", "IPerf", "a-2");
        assert_eq!(source("ns", "IPerf", "a-2", &set_a), None);
        // Nor does its batch wait on it: a-1 ended, the batch is done.
        let taken = tokens.take_ended("set-a", |child| child == "a-1");
        assert_eq!(taken.len(), 1);
    }

    #[test]
    fn a_child_keeps_its_first_key_and_a_batch_ends_with_its_children() {
        let tokens = SetTokens::default();
        tokens.record("set-a", batch("b1", &["x", "y"]));
        // A later batch naming x again (its create answered 409) does not move it.
        let fresh = tokens.record("set-a", batch("b2", &["x", "z"]));
        assert_eq!(fresh, ["z"]);
        let set_a = [owner("BenchmarkSet", "set-a", Some(true))];
        assert_eq!(
            tokens
                .source_for("ns", "IPerf", "x", &set_a)
                .map(|s| s.secret),
            Some("b1".to_owned())
        );
        // y still running: b1 stays; z and x ended: b2 goes, x keeps b1's key.
        let ended = |child: &str| child != "y";
        let taken = tokens.take_ended("set-a", ended);
        assert_eq!(
            taken,
            [("ns".to_owned(), "b2".to_owned(), "b2-uid".to_owned())]
        );
        assert!(tokens.source_for("ns", "IPerf", "z", &set_a).is_none());
        assert!(tokens.source_for("ns", "IPerf", "x", &set_a).is_some());
        let taken = tokens.take_ended("set-a", |_| true);
        assert_eq!(taken.len(), 1);
        assert!(tokens.source_for("ns", "IPerf", "x", &set_a).is_none());
        assert!(tokens.take_ended("set-a", |_| true).is_empty());

        tokens.record("set-a", batch("b3", &["w"]));
        tokens.forget("set-a");
        assert!(tokens.source_for("ns", "IPerf", "w", &set_a).is_none());
        assert!(tokens.take_ended("set-a", |_| true).is_empty());
    }
}
