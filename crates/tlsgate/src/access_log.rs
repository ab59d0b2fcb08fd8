//! The access log's writer: access lines (tracing target `access`) go through a bounded queue to
//! one writer thread, which appends them to `[log] access_log_file` (or stderr), so a worker never
//! waits on a disk or a pipe. When the queue is full the line is dropped and counted
//! (`tlsgate_state{name="access_log_dropped_lines_total"}`), never waited for.
//!
//! For logrotate: the file is reopened at its configured path on SIGUSR1, on `POST /reopen-logs`
//! at the admin listener, or with `tlsgate reopen-logs`; lines queued before the reopen go to the
//! old file, later ones to the new.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::Duration;

/// Lines the queue holds at most; more are dropped until the writer catches up.
pub const QUEUE_LINES: usize = 16 * 1024;

static DROPPED: AtomicU64 = AtomicU64::new(0);
static WRITE_ERRORS: AtomicU64 = AtomicU64::new(0);
/// The writer of this process (there is one subscriber per process, so one writer).
static WRITER: OnceLock<SyncSender<Msg>> = OnceLock::new();

/// Why the access log could not be opened, reopened or started.
#[derive(Debug)]
pub enum AccessLogError {
    /// The file cannot be opened for appending.
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The writer thread cannot be started.
    Thread(io::Error),
    /// The writer thread is gone (the process is stopping), or was never started.
    Stopped,
}

impl fmt::Display for AccessLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open { path, source } => write!(f, "access log {}: cannot open: {source}", path.display()),
            Self::Thread(e) => write!(f, "cannot start the access-log writer thread: {e}"),
            Self::Stopped => f.write_str("the access-log writer is not running"),
        }
    }
}

impl std::error::Error for AccessLogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open { source, .. } | Self::Thread(source) => Some(source),
            Self::Stopped => None,
        }
    }
}

enum Msg {
    Line(Vec<u8>),
    Reopen(SyncSender<Result<String, AccessLogError>>),
    Flush(SyncSender<()>),
}

fn open(path: &Path) -> Result<File, AccessLogError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| AccessLogError::Open {
            path: path.to_path_buf(),
            source,
        })
}

fn sink(file: Option<File>) -> BufWriter<Box<dyn Write + Send>> {
    let out: Box<dyn Write + Send> = match file {
        Some(f) => Box::new(f),
        None => Box::new(io::stderr()),
    };
    BufWriter::with_capacity(64 * 1024, out)
}

/// The `MakeWriter` of the access layer: each line (tracing-subscriber writes an event in one
/// `write`) is queued without waiting.
#[derive(Debug, Clone)]
pub struct QueueWriter {
    tx: SyncSender<Msg>,
}

impl io::Write for &QueueWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.tx.try_send(Msg::Line(buf.to_vec())) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for QueueWriter {
    type Writer = &'a QueueWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

/// Starts the writer thread, appending to `file` (opened now: an error is a startup error) or
/// writing to stderr.
pub fn start(file: Option<&Path>) -> Result<QueueWriter, AccessLogError> {
    start_with(file, QUEUE_LINES)
}

fn start_with(file: Option<&Path>, queue: usize) -> Result<QueueWriter, AccessLogError> {
    let out = sink(file.map(open).transpose()?);
    let (tx, rx) = sync_channel(queue);
    let path = file.map(Path::to_path_buf);
    std::thread::Builder::new()
        .name("tlsgate-access-log".into())
        .spawn(move || run(rx, path, out))
        .map_err(AccessLogError::Thread)?;
    let _ = WRITER.set(tx.clone());
    Ok(QueueWriter { tx })
}

fn run(rx: Receiver<Msg>, path: Option<PathBuf>, mut out: BufWriter<Box<dyn Write + Send>>) {
    let handle = |msg: Msg, out: &mut BufWriter<Box<dyn Write + Send>>| match msg {
        Msg::Line(line) => {
            if out.write_all(&line).is_err() {
                WRITE_ERRORS.fetch_add(1, Ordering::Relaxed);
            }
        }
        Msg::Reopen(done) => {
            let _ = out.flush();
            let result = match &path {
                Some(p) => open(p).map(|f| {
                    *out = sink(Some(f));
                    format!("access log reopened: {}", p.display())
                }),
                None => Ok("the access log goes to stderr: nothing to reopen".to_string()),
            };
            let _ = done.send(result);
        }
        Msg::Flush(done) => {
            let _ = out.flush();
            let _ = done.send(());
        }
    };
    // Idle, the thread waits in `recv` and the first line wakes it; that line is written at once.
    // Then it drains the queue every `BATCH` for as long as lines keep coming, without waiting in
    // `recv`: queueing a line then costs a worker no wake-up system call (measured: that wake-up
    // was most of the access log's cost to a worker).
    const BATCH: Duration = Duration::from_millis(5);
    let flush = |out: &mut BufWriter<Box<dyn Write + Send>>| {
        if out.flush().is_err() {
            WRITE_ERRORS.fetch_add(1, Ordering::Relaxed);
        }
    };
    while let Ok(msg) = rx.recv() {
        handle(msg, &mut out);
        flush(&mut out);
        loop {
            std::thread::sleep(BATCH);
            let mut drained = 0usize;
            while let Ok(msg) = rx.try_recv() {
                handle(msg, &mut out);
                drained += 1;
            }
            flush(&mut out);
            if drained == 0 {
                break;
            }
        }
    }
}

/// Reopens the access-log file at its path (after logrotate renamed it); waits for the writer.
pub fn reopen() -> Result<String, AccessLogError> {
    let writer = WRITER.get().ok_or(AccessLogError::Stopped)?;
    let (tx, rx) = sync_channel(1);
    writer.send(Msg::Reopen(tx)).map_err(|_| AccessLogError::Stopped)?;
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| AccessLogError::Stopped)?
}

/// [`reopen`] off the async thread, logged with what asked for it.
pub async fn reopen_logged(trigger: &'static str) -> Result<String, AccessLogError> {
    let result = tokio::task::spawn_blocking(reopen)
        .await
        .unwrap_or(Err(AccessLogError::Stopped));
    match &result {
        Ok(summary) => tracing::info!("{trigger}: {summary}"),
        Err(e) => tracing::error!("{trigger}: {e}"),
    }
    result
}

/// `POST /reopen-logs` on the admin listener (what `tlsgate reopen-logs` calls): reopens the
/// file; `{"result": "..."}` or, with status 500, `{"error": "..."}`.
pub async fn admin_reopen(method: tlsgate_admin::Method) -> (tlsgate_admin::StatusCode, String) {
    use tlsgate_admin::StatusCode;
    if method != tlsgate_admin::Method::POST {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            r#"{"error":"use POST /reopen-logs"}"#.into(),
        );
    }
    let (status, key, text) = match reopen_logged("POST /reopen-logs").await {
        Ok(summary) => (StatusCode::OK, "result", summary),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, "error", e.to_string()),
    };
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                escaped.push('\\');
                escaped.push(c);
            }
            c if c.is_control() => escaped.push_str(&format!("\\u{:04x}", c as u32)),
            c => escaped.push(c),
        }
    }
    (status, format!("{{\"{key}\":\"{escaped}\"}}"))
}

/// Waits (at most `timeout`) until every line queued so far is written.
pub fn flush(timeout: Duration) {
    if let Some(writer) = WRITER.get() {
        let (tx, rx) = sync_channel(1);
        if writer.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv_timeout(timeout);
        }
    }
}

/// Lines dropped because the queue was full.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Failed writes (disk full, closed stderr).
pub fn write_errors() -> u64 {
    WRITE_ERRORS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (tx, _rx) = sync_channel(2);
        let writer = QueueWriter { tx };
        let before = dropped();
        for _ in 0..5 {
            assert_eq!((&writer).write(b"line\n").unwrap(), 5);
        }
        assert_eq!(dropped() - before, 3);
    }

    #[test]
    fn lines_are_appended_and_reopen_follows_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let (tx, rx) = sync_channel(16);
        let out = sink(Some(open(&path).unwrap()));
        let p = path.clone();
        let thread = std::thread::spawn(move || run(rx, Some(p), out));
        let writer = QueueWriter { tx: tx.clone() };
        (&writer).write_all(b"one\n").unwrap();
        std::fs::rename(&path, dir.path().join("access.log.1")).unwrap();
        let (done, wait) = sync_channel(1);
        tx.send(Msg::Reopen(done)).unwrap();
        assert!(wait.recv().unwrap().unwrap().contains("reopened"));
        (&writer).write_all(b"two\n").unwrap();
        drop((writer, tx));
        thread.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("access.log.1")).unwrap(),
            "one\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    }
}
