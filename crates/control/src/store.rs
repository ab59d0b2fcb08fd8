//! [`ControlStore`]: the versioned document in Redis.
//!
//! Layout under the prefix (default `tlsgate:control:{CLUSTER}:`; the braces make it a Redis
//! Cluster hash tag, so every key of one cluster lives in one slot):
//!
//! | key | type | content |
//! |---|---|---|
//! | `current` | string | the current version number |
//! | `seq` | string | the last version number handed out (INCR) |
//! | `version:N` | string | the [`Versioned`] record of version N as JSON, never rewritten |
//! | `history` | list | version numbers, newest first (LPUSH) |
//! | `changes` | pub/sub channel | the new version number, published with every version |
//! | `node:ID`, `nodes` | string (TTL), sorted set | the node registry ([`crate::nodes`]) |
//!
//! A publish is one Lua script, so it is atomic: it checks that `current` still is the
//! caller's expected parent, takes the next number, writes the record, moves `current`,
//! appends to `history` and publishes on `changes`.

use crate::document::ClusterDocument;
use crate::error::StoreConfigError;
use crate::keys::{Keys, StoreConfig};
use crate::{now_ms, ControlError};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, FromRedisValue};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One stored version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versioned {
    /// Version number (1, 2, …), unique per cluster.
    pub version: u64,
    /// The version that was current when this one was published (`None` for the first).
    pub parent: Option<u64>,
    /// Who published it (console user, `ctl` user, …).
    pub author: String,
    /// When, in Unix milliseconds (the publisher's clock).
    pub at: u64,
    /// Free text from the author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Set when this version was made by [`ControlStore::rollback`]: the version restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<u64>,
    /// The document.
    pub document: ClusterDocument,
}

/// The record as the publisher sends it; the script prepends `version` and `parent`.
#[derive(Serialize)]
struct Body<'a> {
    author: &'a str,
    at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rollback_of: Option<u64>,
    document: &'a ClusterDocument,
}

const PUBLISH_SCRIPT: &str = r#"
local cur = redis.call('GET', KEYS[1])
local curn = cur and tonumber(cur)
local curs = ''
if curn then curs = cur end
if curs ~= ARGV[1] then return 'conflict:' .. curs end
local n = redis.call('INCR', KEYS[2])
if curn and n <= curn then n = curn + 1 end
while redis.call('EXISTS', ARGV[2] .. n) == 1 do n = n + 1 end
redis.call('SET', KEYS[2], n)
local parent = 'null'
if curn then parent = curs end
redis.call('SET', ARGV[2] .. n, '{"version":' .. n .. ',"parent":' .. parent .. ',' .. ARGV[3])
redis.call('SET', KEYS[1], n)
redis.call('LPUSH', KEYS[3], n)
redis.call('PUBLISH', ARGV[4], n)
return 'ok:' .. n
"#;

/// The control store of one cluster. Cheap to clone (shared connection); reconnects by itself
/// after a failure (the next command opens a new connection).
#[derive(Clone)]
pub struct ControlStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    config: StoreConfig,
    keys: Keys,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

impl std::fmt::Debug for ControlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlStore")
            .field("prefix", &self.inner.keys.prefix())
            .finish_non_exhaustive()
    }
}

impl ControlStore {
    /// A store for `config` (connects lazily, on the first command).
    pub fn new(config: StoreConfig) -> Result<Self, ControlError> {
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if config.prefix.is_none() && (config.cluster.is_empty() || !config.cluster.chars().all(name_ok)) {
            return Err(StoreConfigError::ClusterName(config.cluster.clone()).into());
        }
        let client = redis::Client::open(config.url.as_str()).map_err(StoreConfigError::Url)?;
        let keys = Keys::new(config.key_prefix());
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                config,
                keys,
                conn: tokio::sync::Mutex::new(None),
            }),
        })
    }

    /// The key names.
    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    pub(crate) fn client(&self) -> &redis::Client {
        &self.inner.client
    }

    async fn connection(&self) -> Result<MultiplexedConnection, ControlError> {
        let mut slot = self.inner.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let cfg = &self.inner.config;
        let acc = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(cfg.connect_timeout))
            .set_response_timeout(Some(cfg.response_timeout));
        let bound = cfg.connect_timeout + cfg.response_timeout;
        let c = tokio::time::timeout(
            bound,
            self.inner.client.get_multiplexed_async_connection_with_config(&acc),
        )
        .await
        .map_err(|_| ControlError::Timeout(bound))??;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Runs one command; a failed connection is dropped so the next command reconnects.
    pub(crate) async fn run<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, ControlError> {
        let mut c = self.connection().await?;
        let bound = self.inner.config.response_timeout;
        let answer = tokio::time::timeout(bound, cmd.query_async::<T>(&mut c)).await;
        self.settle(answer, bound).await
    }

    /// Runs a pipeline (a `MULTI` transaction when made with `atomic()`), like [`run`](Self::run).
    pub(crate) async fn run_pipe<T: FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T, ControlError> {
        let mut c = self.connection().await?;
        let bound = self.inner.config.response_timeout;
        let answer = tokio::time::timeout(bound, pipe.query_async::<T>(&mut c)).await;
        self.settle(answer, bound).await
    }

    async fn settle<T>(
        &self,
        answer: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
        bound: std::time::Duration,
    ) -> Result<T, ControlError> {
        let result = match answer {
            Ok(Ok(v)) => return Ok(v),
            // The server answered (an error reply, a type mismatch): the connection is fine.
            Ok(Err(e))
                if matches!(
                    e.kind(),
                    redis::ErrorKind::Server(_) | redis::ErrorKind::UnexpectedReturnType
                ) =>
            {
                return Err(e.into())
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(ControlError::Timeout(bound)),
        };
        *self.inner.conn.lock().await = None;
        result
    }

    /// `PING`: whether the store answers.
    pub async fn ping(&self) -> Result<(), ControlError> {
        self.run::<String>(&redis::cmd("PING")).await.map(|_| ())
    }

    /// The current version number (`None`: nothing published yet).
    pub async fn current_version(&self) -> Result<Option<u64>, ControlError> {
        let key = self.keys().current();
        let raw: Option<String> = self.run(redis::cmd("GET").arg(&key)).await?;
        raw.map(|s| {
            s.trim().parse::<u64>().map_err(|_| ControlError::Corrupt {
                key,
                reason: format!("{s:?} is not a version number"),
            })
        })
        .transpose()
    }

    /// Version `n` as stored (parsed, not validated). [`ControlError::NotFound`] if absent,
    /// [`ControlError::Corrupt`] if it does not parse.
    pub async fn get(&self, n: u64) -> Result<Versioned, ControlError> {
        let key = self.keys().version(n);
        let raw: Option<String> = self.run(redis::cmd("GET").arg(&key)).await?;
        parse_record(&key, n, raw.as_deref().ok_or(ControlError::NotFound(n))?)
    }

    /// The current version (`None`: nothing published yet).
    pub async fn current(&self) -> Result<Option<Versioned>, ControlError> {
        match self.current_version().await? {
            Some(n) => self.get(n).await.map(Some),
            None => Ok(None),
        }
    }

    /// Publishes `document` as a new version whose parent is `expected_parent` (`None`: the
    /// store must be empty). Validates structurally first ([`ControlError::Invalid`]); fails with
    /// [`ControlError::Conflict`] if the current version is not `expected_parent`.
    pub async fn publish(
        &self,
        document: &ClusterDocument,
        author: &str,
        comment: Option<&str>,
        expected_parent: Option<u64>,
    ) -> Result<Versioned, ControlError> {
        self.publish_inner(document, author, comment, expected_parent, None)
            .await
    }

    async fn publish_inner(
        &self,
        document: &ClusterDocument,
        author: &str,
        comment: Option<&str>,
        expected_parent: Option<u64>,
        rollback_of: Option<u64>,
    ) -> Result<Versioned, ControlError> {
        let mut problems = document.validate().err().unwrap_or_default();
        if author.trim().is_empty() {
            problems.push("author is empty".into());
        }
        if !problems.is_empty() {
            return Err(ControlError::Invalid(problems));
        }
        let at = now_ms();
        let body = Body {
            author,
            at,
            comment,
            rollback_of,
            document,
        };
        let json = serde_json::to_string(&body).expect("a record always serialises");
        let keys = self.keys();
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PUBLISH_SCRIPT)
            .arg(3)
            .arg(keys.current())
            .arg(keys.seq())
            .arg(keys.history())
            .arg(expected_parent.map(|v| v.to_string()).unwrap_or_default())
            .arg(keys.version_prefix())
            .arg(&json[1..])
            .arg(keys.changes());
        let answer: String = self.run(&cmd).await?;
        if let Some(cur) = answer.strip_prefix("conflict:") {
            return Err(ControlError::Conflict {
                expected: expected_parent,
                current: cur.parse().ok(),
            });
        }
        let version = answer
            .strip_prefix("ok:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| ControlError::Corrupt {
                key: "publish script".into(),
                reason: answer.clone(),
            })?;
        tracing::info!(version, author, "control: published version");
        Ok(Versioned {
            version,
            parent: expected_parent,
            author: author.into(),
            at,
            comment: comment.map(Into::into),
            rollback_of,
            document: document.clone(),
        })
    }

    /// Publishes a new version whose document equals version `to`'s (history stays
    /// append-only). Its parent is whatever is current; a concurrent publish is retried.
    pub async fn rollback(&self, to: u64, author: &str, comment: Option<&str>) -> Result<Versioned, ControlError> {
        let target = self.get(to).await?;
        let default_comment = format!("rollback to version {to}");
        let comment = comment.unwrap_or(&default_comment);
        let mut attempts = 0;
        loop {
            let parent = self.current_version().await.or_else(|e| match e {
                ControlError::Corrupt { .. } => Ok(None),
                e => Err(e),
            })?;
            match self
                .publish_inner(&target.document, author, Some(comment), parent, Some(to))
                .await
            {
                Err(ControlError::Conflict { .. }) if attempts < 3 => attempts += 1,
                other => return other,
            }
        }
    }
}

/// Parses the record stored under `key` for version `n`.
pub fn parse_record(key: &str, n: u64, text: &str) -> Result<Versioned, ControlError> {
    let rec: Versioned = serde_json::from_str(text).map_err(|e| ControlError::Corrupt {
        key: key.into(),
        reason: format!("not a valid record: {e}"),
    })?;
    if rec.version != n {
        return Err(ControlError::Corrupt {
            key: key.into(),
            reason: format!("record says version {}", rec.version),
        });
    }
    Ok(rec)
}
