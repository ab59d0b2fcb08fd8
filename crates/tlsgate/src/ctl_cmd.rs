//! `tlsgate ctl`: edit the cluster's dynamic configuration document in Redis from scripts
//! (docs/CONTROL.md): show, history, publish, rollback, member edits, nodes.

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tlsgate_control::ctl::{self, Group, MemberEdit};
use tlsgate_control::{ControlStore, StoreConfig};

/// `tlsgate ctl` arguments.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// Redis holding the control documents (as `[control] redis_url`).
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Cluster name (as `[control] cluster_name`).
    #[arg(long, default_value = "default")]
    cluster: String,
    /// Who makes the change (recorded in the history); default `$USER@HOSTNAME`.
    #[arg(long)]
    author: Option<String>,
    /// Why (recorded in the history).
    #[arg(long, short = 'm')]
    comment: Option<String>,
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Print the current version (header and JSON document).
    Show,
    /// The last N versions with who, when and what changed.
    History {
        /// How many.
        #[arg(default_value_t = 20)]
        limit: usize,
    },
    /// Publish a whole document (JSON) as the next version.
    Publish {
        /// The document.
        file: PathBuf,
        /// Refuse unless this is still the current version.
        #[arg(long)]
        if_version: Option<u64>,
    },
    /// Publish a new version equal to version N.
    Rollback {
        /// The version to return to.
        version: u64,
    },
    /// Add a key server to a pool (or an origin to an upstream group with --upstream).
    Add(MemberArgs),
    /// Remove a member.
    Remove(MemberArgs),
    /// Drain a member: no new work while others are available.
    Drain(MemberArgs),
    /// Undo a drain.
    Undrain(MemberArgs),
    /// Set a member's weight (1..=1000).
    Weight {
        #[command(flatten)]
        member: MemberArgs,
        /// The new weight.
        weight: u32,
    },
    /// The live nodes: applied version, refused version, store errors.
    Nodes,
}

#[derive(Args, Debug)]
struct MemberArgs {
    /// Key-server pool name (or upstream group with --upstream).
    group: String,
    /// `host:port`.
    address: String,
    /// The group is an upstream group, not a key-server pool.
    #[arg(long)]
    upstream: bool,
}

impl MemberArgs {
    fn group(&self) -> Group {
        if self.upstream {
            Group::Upstream(self.group.clone())
        } else {
            Group::Pool(self.group.clone())
        }
    }
}

/// Runs `tlsgate ctl`.
pub fn run(args: &CtlArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(run_async(args))
}

async fn run_async(args: &CtlArgs) -> anyhow::Result<ExitCode> {
    let store = ControlStore::new(StoreConfig::new(&args.redis, &args.cluster))?;
    let author = args.author.clone().unwrap_or_else(default_author);
    let comment = args.comment.as_deref();
    let edit = |m: &MemberArgs, e: MemberEdit| (m.group(), m.address.clone(), e);
    let one = match &args.action {
        Action::Show => {
            match ctl::show(&store).await? {
                Some(v) => print!("{}", ctl::render_version(&v)),
                None => println!("nothing published yet"),
            }
            return Ok(ExitCode::SUCCESS);
        }
        Action::History { limit } => {
            print!("{}", ctl::render_history(&ctl::history(&store, *limit).await?));
            return Ok(ExitCode::SUCCESS);
        }
        Action::Nodes => {
            for n in store.nodes().await? {
                println!("{}", node_line(&n));
            }
            return Ok(ExitCode::SUCCESS);
        }
        Action::Publish { file, if_version } => {
            let v = ctl::publish_file(&store, file, &author, comment, *if_version).await?;
            println!("published {}", ctl::render_header(&v));
            return Ok(ExitCode::SUCCESS);
        }
        Action::Rollback { version } => {
            let v = ctl::rollback(&store, *version, &author, comment).await?;
            println!("published {}", ctl::render_header(&v));
            return Ok(ExitCode::SUCCESS);
        }
        Action::Add(m) => edit(
            m,
            MemberEdit::Add {
                weight: 1,
                drain: false,
            },
        ),
        Action::Remove(m) => edit(m, MemberEdit::Remove),
        Action::Drain(m) => edit(m, MemberEdit::Drain(true)),
        Action::Undrain(m) => edit(m, MemberEdit::Drain(false)),
        Action::Weight { member, weight } => edit(member, MemberEdit::Weight(*weight)),
    };
    let (v, changes) = ctl::edit_members(&store, &[one], &author, comment).await?;
    println!("published {}", ctl::render_header(&v));
    print!("{}", tlsgate_control::diff::render(&changes));
    Ok(ExitCode::SUCCESS)
}

fn node_line(n: &tlsgate_control::NodeStatus) -> String {
    let rejected = n
        .rejected
        .as_ref()
        .map(|r| format!(" refused={} ({})", r.version, r.reasons.join("; ")))
        .unwrap_or_default();
    let error = n
        .store_error
        .as_ref()
        .map(|e| format!(" store_error={e:?}"))
        .unwrap_or_default();
    format!(
        "{} applied={} admin={} last_seen={}{rejected}{error}",
        n.node_id,
        n.applied_version.map_or_else(|| "none".into(), |v| v.to_string()),
        n.admin_url.as_deref().unwrap_or("-"),
        ctl::format_ms(n.last_seen)
    )
}

fn default_author() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "localhost".into(), |h| h.trim().to_string());
    format!("{user}@{host}")
}
