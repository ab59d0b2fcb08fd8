//! ttlb-pq under the paper's own conditions (seed 004's figures 1, 4 and 6), as extra settings of
//! the matrix that only run when named: `--network fig1` (or `fig4`, `fig6`, or one of the
//! networks below by name). All at initcwnd 20, as in the paper.
//!
//! - **fig1**: handshake time, 1 Mbit/s, loss 0 / 1 / 3 / 10 %, RTT 35 and 200 ms (0 KiB);
//! - **fig4**: 1 Mbit/s, 200 ms, 10 % loss, 0–200 KiB;
//! - **fig6**: 200 KiB at 35 ms on 1 Gbit/s + 5 % loss, 1 Mbit/s + 10 % loss and 1 Gbit/s with
//!   paretonormal jitter (35 ms ± 35/4 ms).
//!
//! Netem placement as in the authors' published scripts (netem on both veth ends, each with
//! half the RTT as delay, the loss rate and the rate limit): every direction gets RTT/2 of delay,
//! the loss probability and the rate (`Network::spec`).

use super::Network;

/// The figures this module knows.
pub const FIGURES: [&str; 3] = ["fig1", "fig4", "fig6"];

/// The paper's initcwnd.
pub const INITCWND: u32 = 20;

/// One network of a figure, with the response sizes (bytes) the figure needs.
#[derive(Debug, Clone)]
pub struct PaperCell {
    /// Figure.
    pub figure: &'static str,
    /// Network.
    pub net: Network,
    /// Response sizes, bytes.
    pub sizes: Vec<usize>,
}

fn one_mbit(rtt: u32, loss_pct: u32) -> Network {
    let name = if loss_pct == 0 {
        format!("{rtt}ms-1m")
    } else {
        format!("{rtt}ms-1m-loss{loss_pct}")
    };
    Network::new(&name, f64::from(rtt), 1.0, f64::from(loss_pct) / 100.0)
}

/// Every cell of the three figures.
pub fn cells() -> Vec<PaperCell> {
    let kib = |v: &[usize]| v.iter().map(|k| k * 1024).collect::<Vec<_>>();
    let mut v = vec![];
    for rtt in [35, 200] {
        for loss in [0, 1, 3, 10] {
            v.push(PaperCell {
                figure: "fig1",
                net: one_mbit(rtt, loss),
                sizes: vec![0],
            });
        }
    }
    v.push(PaperCell {
        figure: "fig4",
        net: one_mbit(200, 10),
        sizes: kib(&[0, 16, 64, 128, 200]),
    });
    let mut jitter = Network::new("35ms-1g-jitter", 35.0, 1000.0, 0.0);
    jitter.jitter_ms = 35.0 / 4.0;
    for net in [
        Network::new("35ms-1g-loss5", 35.0, 1000.0, 0.05),
        one_mbit(35, 10),
        jitter,
    ] {
        v.push(PaperCell {
            figure: "fig6",
            net,
            sizes: kib(&[200]),
        });
    }
    v
}

/// The cells a `--network` name asks for: a figure's cells, or every paper cell on a network of
/// that name (sizes of all its figures).
pub fn named(name: &str) -> Vec<PaperCell> {
    cells()
        .into_iter()
        .filter(|c| c.figure == name || c.net.name == name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_have_the_papers_conditions() {
        let f1 = named("fig1");
        assert_eq!(f1.len(), 8);
        assert!(f1.iter().all(|c| c.net.rate_mbps == 1.0 && c.sizes == vec![0]));
        let losses: Vec<f64> = f1.iter().map(|c| c.net.loss).collect();
        assert_eq!(losses, vec![0.0, 0.01, 0.03, 0.1, 0.0, 0.01, 0.03, 0.1]);
        let f4 = named("fig4");
        assert_eq!(f4.len(), 1);
        assert_eq!(
            (f4[0].net.rtt_ms, f4[0].net.rate_mbps, f4[0].net.loss),
            (200.0, 1.0, 0.1)
        );
        assert_eq!(f4[0].sizes.last(), Some(&(200 * 1024)));
        let f6 = named("fig6");
        assert_eq!(f6.len(), 3);
        assert!(f6.iter().all(|c| c.net.rtt_ms == 35.0 && c.sizes == vec![200 * 1024]));
        // By network name: fig1's 0 KiB and fig4's sizes together.
        let n = named("200ms-1m-loss10");
        assert_eq!(n.len(), 2);
        assert!(named("nowhere").is_empty());
    }
}
