//! Pod logs: `GET /api/v1/namespaces/{ns}/pods/{name}/log`, answered from text a test
//! sets with [`crate::ApiDouble::set_pod_log`], as a kubelet would from a container's log.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::ApiError;

/// Logs by namespace, pod and container, and the pods whose logs cannot be read.
#[derive(Debug, Default)]
pub(crate) struct PodLogs {
    logs: Mutex<HashMap<(String, String, String), String>>,
    failures: Mutex<HashMap<(String, String), LogFailure>>,
}

/// How reading a pod's log fails, as a real apiserver answers when it cannot get the
/// log from the pod's kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFailure {
    /// The kubelet does not answer (its node is gone or unreachable): 500 with the
    /// apiserver's `connect: connection refused` message.
    KubeletUnreachable,
    /// The apiserver or kubelet fails: 503 ServiceUnavailable.
    ServiceUnavailable,
}

impl LogFailure {
    fn error(self, ns: &str, pod: &str, container: &str) -> ApiError {
        match self {
            Self::KubeletUnreachable => ApiError::new(
                500,
                "InternalError",
                format!(
                    "Get \"https://127.0.0.1:10250/containerLogs/{ns}/{pod}/{container}\": dial tcp 127.0.0.1:10250: connect: connection refused"
                ),
            ),
            Self::ServiceUnavailable => ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
        }
    }
}

/// The query parameters of a log request the double honours.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LogQuery {
    pub container: Option<String>,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
}

impl LogQuery {
    pub fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let number = |key: &str| {
            query
                .get(key)
                .map(|value| {
                    value.parse::<usize>().map_err(|_| {
                        ApiError::bad_request(format!("invalid {key} {value:?}: not a number"))
                    })
                })
                .transpose()
        };
        Ok(Self {
            container: query.get("container").filter(|c| !c.is_empty()).cloned(),
            tail_lines: number("tailLines")?,
            limit_bytes: number("limitBytes")?,
        })
    }
}

impl PodLogs {
    pub fn set(&self, ns: &str, pod: &str, container: &str, text: &str) {
        self.lock().insert(
            (ns.to_owned(), pod.to_owned(), container.to_owned()),
            text.to_owned(),
        );
    }

    /// Makes every read of `pod`'s log fail this way (`None`: readable again).
    pub fn set_failure(&self, ns: &str, pod: &str, failure: Option<LogFailure>) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (ns.to_owned(), pod.to_owned());
        match failure {
            Some(failure) => failures.insert(key, failure),
            None => failures.remove(&key),
        };
    }

    /// The log of a container of `pod` (the stored object), as the kubelet would serve it.
    /// A container that has logged nothing (or was never given a log) has an empty log.
    pub fn read(&self, ns: &str, pod: &Value, query: &LogQuery) -> Result<String, ApiError> {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let containers = container_names(pod);
        let container = match &query.container {
            Some(container) if containers.contains(container) => container.clone(),
            Some(container) => {
                return Err(ApiError::bad_request(format!(
                    "container {container} is not valid for pod {name}"
                )));
            }
            None if containers.len() == 1 => containers[0].clone(),
            None => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                )));
            }
        };
        let failure = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(ns.to_owned(), name.to_owned()))
            .copied();
        if let Some(failure) = failure {
            return Err(failure.error(ns, name, &container));
        }
        let text = self
            .lock()
            .get(&(ns.to_owned(), name.to_owned(), container))
            .cloned()
            .unwrap_or_default();
        Ok(select(&text, query))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String, String), String>> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Names of the pod's init and regular containers.
fn container_names(pod: &Value) -> Vec<String> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|field| pod["spec"][field].as_array())
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// `tailLines` first (the last N lines), then `limitBytes` (the first N bytes of what is
/// left, cut at a character boundary), as the kubelet applies them.
fn select(text: &str, query: &LogQuery) -> String {
    let mut text = text;
    if let Some(tail) = query.tail_lines {
        let lines = text.split_inclusive('\n').count();
        let skip = lines.saturating_sub(tail);
        let start: usize = text.split_inclusive('\n').take(skip).map(str::len).sum();
        text = &text[start..];
    }
    if let Some(limit) = query.limit_bytes
        && limit < text.len()
    {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text = &text[..end];
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(tail_lines: Option<usize>, limit_bytes: Option<usize>) -> LogQuery {
        LogQuery {
            container: None,
            tail_lines,
            limit_bytes,
        }
    }

    #[test]
    fn tail_lines_then_limit_bytes() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(select(text, &query(None, None)), text);
        assert_eq!(select(text, &query(Some(2), None)), "two\nthree\n");
        assert_eq!(select(text, &query(Some(9), None)), text);
        assert_eq!(select(text, &query(Some(0), None)), "");
        assert_eq!(select("a\nlast", &query(Some(1), None)), "last");
        assert_eq!(select(text, &query(Some(2), Some(5))), "two\nt");
        assert_eq!(
            select("é", &query(None, Some(1))),
            "",
            "never splits a character"
        );
    }

    #[test]
    fn picks_the_container() {
        let logs = PodLogs::default();
        let pod = serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "agent"}]},
        });
        logs.set("ns", "p", "agent", "hello\n");
        let with = |container: Option<&str>| LogQuery {
            container: container.map(str::to_owned),
            ..LogQuery::default()
        };
        assert_eq!(
            logs.read("ns", &pod, &with(Some("agent"))).unwrap(),
            "hello\n"
        );
        assert_eq!(logs.read("ns", &pod, &with(Some("init"))).unwrap(), "");
        let error = logs.read("ns", &pod, &with(Some("nope"))).unwrap_err();
        assert_eq!(error.code, 400);
        let error = logs.read("ns", &pod, &with(None)).unwrap_err();
        assert!(error.message.contains("[init agent]"), "{}", error.message);
    }

    #[tokio::test]
    async fn served_over_http_and_recorded_as_pods_log() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, LogParams, PostParams};

        let double = crate::ApiDouble::start().await;
        let pods: Api<Pod> = Api::default_namespaced(double.client());
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "client-0"},
            "spec": {"containers": [{"name": "agent", "image": "x"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        double.set_pod_log("default", "client-0", "agent", "a\nb\nc\n");

        let all = pods
            .logs(
                "client-0",
                &LogParams {
                    container: Some("agent".into()),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(all, "a\nb\nc\n");
        let tail = pods
            .logs(
                "client-0",
                &LogParams {
                    tail_lines: Some(1),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(tail, "c\n", "the only container is the default");

        match pods.logs("missing", &LogParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 404),
            other => panic!("expected 404, got {other:?}"),
        }
        let logged: Vec<_> = double
            .requests()
            .into_iter()
            .filter(|r| r.rbac_resource() == "pods/log")
            .map(|r| (r.verb, r.name.unwrap_or_default(), r.status_code))
            .collect();
        assert_eq!(
            logged,
            [
                ("get".to_owned(), "client-0".to_owned(), 200),
                ("get".to_owned(), "client-0".to_owned(), 200),
                ("get".to_owned(), "missing".to_owned(), 404),
            ]
        );

        double.fail_next(
            crate::RequestMatcher::new("get", "pods/log"),
            500,
            "InternalError",
        );
        match pods.logs("client-0", &LogParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 500),
            other => panic!("expected the injected 500, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_pods_log_fails_until_its_kubelet_is_back() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, LogParams, PostParams};

        let double = crate::ApiDouble::start().await;
        let pods: Api<Pod> = Api::default_namespaced(double.client());
        for name in ["gone-0", "here-0"] {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "agent", "image": "x"}]},
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
        double.fail_pod_log("default", "gone-0", Some(LogFailure::KubeletUnreachable));
        for _ in 0..2 {
            match pods.logs("gone-0", &LogParams::default()).await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!(status.code, 500);
                    assert!(
                        status.message.ends_with("connect: connection refused"),
                        "{}",
                        status.message
                    );
                }
                other => panic!("expected a 500, got {other:?}"),
            }
        }
        assert_eq!(
            pods.logs("here-0", &LogParams::default()).await.unwrap(),
            ""
        );
        double.fail_pod_log("default", "gone-0", None);
        assert_eq!(
            pods.logs("gone-0", &LogParams::default()).await.unwrap(),
            ""
        );
    }
}
