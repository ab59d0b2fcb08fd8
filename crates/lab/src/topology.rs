//! The lab topology: namespaces A (client) and B (server), a TUN device in each on a
//! point-to-point link (10.77.0.1 ↔ 10.77.0.2), and the forwarder between them. Everything is
//! removed on drop: the forwarder stops (closing the TUN devices, which deletes them), then both
//! namespaces are deleted.

use crate::forward::{Capture, DirStats, Forwarder};
use crate::link::LinkSpec;
use crate::netns::{self, ip, Netns};
use anyhow::Context;
use std::net::Ipv4Addr;
use tun_rs::{DeviceBuilder, SyncDevice};

/// Address of the client side (namespace A).
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Address of the server side (namespace B).
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

/// Memory cap of a capture ([`Lab::start_capture`]): packet bytes kept.
pub const CAPTURE_MAX_BYTES: usize = 64 << 20;

/// Settings of a lab beyond the link impairments.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// MTU of both TUN devices.
    pub mtu: u16,
    /// Initial congestion window (segments) on both sides' routes; `None` = kernel default (10).
    pub initcwnd: Option<u32>,
    /// Seed of the random draws.
    pub seed: u64,
}

impl Default for LabOptions {
    fn default() -> Self {
        Self {
            mtu: 1500,
            initcwnd: None,
            seed: rand::random(),
        }
    }
}

/// A running lab. Field order is drop order: forwarder first, then the namespaces.
#[derive(Debug)]
pub struct Lab {
    fwd: Forwarder,
    dev_a: String,
    dev_b: String,
    /// Client namespace.
    pub a: Netns,
    /// Server namespace.
    pub b: Netns,
    id: String,
}

impl Lab {
    /// Builds a lab with default options.
    pub fn new(a_to_b: LinkSpec, b_to_a: LinkSpec) -> anyhow::Result<Self> {
        Self::with_options(a_to_b, b_to_a, &LabOptions::default())
    }

    /// Builds a lab.
    pub fn with_options(a_to_b: LinkSpec, b_to_a: LinkSpec, opts: &LabOptions) -> anyhow::Result<Self> {
        a_to_b.validate()?;
        b_to_a.validate()?;
        let id = netns::unique_id();
        let a = Netns::create(&format!("{id}a"))?;
        let b = Netns::create(&format!("{id}b"))?;
        // Device names only need to be unique inside their (unique) namespace.
        let (dev_a, dev_b) = ("tgl-a".to_string(), "tgl-b".to_string());
        let (na, nb, da, db, mtu) = (
            a.name().to_string(),
            b.name().to_string(),
            dev_a.clone(),
            dev_b.clone(),
            opts.mtu,
        );
        let (tun_a, tun_b) = std::thread::spawn(move || -> anyhow::Result<(SyncDevice, SyncDevice)> {
            netns::enter(&na)?;
            let ta = open_tun(&da, mtu)?;
            netns::enter(&nb)?;
            let tb = open_tun(&db, mtu)?;
            Ok((ta, tb))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("TUN setup thread panicked"))??;
        for (ns, dev, me, peer) in [(&a, &dev_a, ADDR_A, ADDR_B), (&b, &dev_b, ADDR_B, ADDR_A)] {
            let n = ns.name();
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &me.to_string(),
                "peer",
                &format!("{peer}/32"),
                "dev",
                dev,
            ])?;
            ip(&[
                "-n",
                n,
                "link",
                "set",
                dev,
                "mtu",
                &mtu.to_string(),
                "txqueuelen",
                "10000",
                "up",
            ])?;
            // Fresh TCP state for every connection: no cached ssthresh/cwnd/RTT between samples.
            netns::sysctl(n, "net.ipv4.tcp_no_metrics_save", "1")?;
            // Client and server TCP Fast Open (listeners still opt in per socket).
            netns::sysctl(n, "net.ipv4.tcp_fastopen", "3")?;
        }
        let fwd = Forwarder::start(tun_a, tun_b, a_to_b, b_to_a, opts.seed)?;
        let lab = Self {
            fwd,
            dev_a,
            dev_b,
            a,
            b,
            id,
        };
        lab.set_initcwnd(opts.initcwnd)?;
        Ok(lab)
    }

    /// This lab's unique id (prefix of its namespace names).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Replaces both directions' impairments (takes effect for the next packet).
    pub fn set_links(&self, a_to_b: LinkSpec, b_to_a: LinkSpec) -> anyhow::Result<()> {
        a_to_b.validate()?;
        b_to_a.validate()?;
        self.fwd.set_links(a_to_b, b_to_a);
        Ok(())
    }

    /// The same impairments both ways.
    pub fn set_symmetric(&self, spec: LinkSpec) -> anyhow::Result<()> {
        self.set_links(spec.clone(), spec)
    }

    /// Sets the initial congestion window on both sides' route to the peer (`None`: default).
    pub fn set_initcwnd(&self, initcwnd: Option<u32>) -> anyhow::Result<()> {
        for (ns, dev, peer) in [(&self.a, &self.dev_a, ADDR_B), (&self.b, &self.dev_b, ADDR_A)] {
            let mut args = vec!["-n", ns.name(), "route", "replace", "PEER", "dev", dev.as_str()];
            let peer = format!("{peer}/32");
            args[4] = &peer;
            let n;
            if let Some(c) = initcwnd {
                n = c.to_string();
                args.extend(["initcwnd", n.as_str()]);
            }
            ip(&args).context("setting initcwnd")?;
        }
        Ok(())
    }

    /// Forwarder counters (A→B, B→A).
    pub fn stats(&self) -> (DirStats, DirStats) {
        self.fwd.stats()
    }

    /// Starts the forwarder's packet tap (restarting it if on): every packet delivered from
    /// then on, A→B (client → server) and B→A, is kept whole (up to 2,048 bytes; the MTU is
    /// smaller) with its delivery time, up to [`CAPTURE_MAX_BYTES`] in all.
    pub fn start_capture(&self) {
        self.fwd.start_capture(2048, CAPTURE_MAX_BYTES);
    }

    /// Stops the tap and returns the delivered packets (and how many did not fit).
    pub fn take_capture(&self) -> Capture {
        self.fwd.take_capture()
    }
}

fn open_tun(name: &str, mtu: u16) -> anyhow::Result<SyncDevice> {
    DeviceBuilder::new()
        .name(name)
        .mtu(mtu)
        .build_sync()
        .with_context(|| format!("cannot create TUN device {name}"))
}
